// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @title AgentGovernor
/// @notice A simple governor: one vote per address that holds the protocol token, cast with
/// OpenZeppelin Governor's `castVoteWithReason(proposalId, support, reason)` semantics
/// (support 0 against, 1 for, 2 abstain) and its `VoteCast` event. Proposal ids count up
/// from 1, so they are plain JSON integers. A proposal is open from creation until
/// `voteEnd`; votes are tallied but nothing is executed.
contract AgentGovernor is AccessControl {
    bytes32 public constant PROPOSER_ROLE = keccak256("PROPOSER_ROLE");

    enum ProposalState {
        Active,
        Closed
    }

    struct Proposal {
        string title;
        string description;
        address proposer;
        uint64 voteStart;
        uint64 voteEnd;
        uint256 againstVotes;
        uint256 forVotes;
        uint256 abstainVotes;
    }

    IERC20 public immutable token;
    uint64 public immutable votingPeriod;
    uint256 public proposalCount;
    mapping(uint256 proposalId => Proposal) private _proposals;
    mapping(uint256 proposalId => mapping(address voter => bool)) public hasVoted;
    mapping(address voter => uint256) public votesCastBy;

    error UnknownProposal(uint256 proposalId);
    error VotingClosed(uint256 proposalId);
    error AlreadyVoted(uint256 proposalId, address voter);
    error InvalidSupport(uint8 support);
    error NoVotingPower(address voter);
    error EmptyTitle();

    event ProposalCreated(
        uint256 proposalId, address proposer, string title, string description, uint256 voteStart, uint256 voteEnd
    );
    event VoteCast(address indexed voter, uint256 proposalId, uint8 support, uint256 weight, string reason);

    constructor(IERC20 token_, uint64 votingPeriod_, address admin) {
        token = token_;
        votingPeriod = votingPeriod_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _grantRole(PROPOSER_ROLE, admin);
    }

    function propose(string calldata title, string calldata description)
        external
        onlyRole(PROPOSER_ROLE)
        returns (uint256 proposalId)
    {
        if (bytes(title).length == 0) revert EmptyTitle();
        proposalId = ++proposalCount;
        Proposal storage proposal = _proposals[proposalId];
        proposal.title = title;
        proposal.description = description;
        proposal.proposer = msg.sender;
        proposal.voteStart = uint64(block.timestamp);
        proposal.voteEnd = uint64(block.timestamp) + votingPeriod;
        emit ProposalCreated(proposalId, msg.sender, title, description, proposal.voteStart, proposal.voteEnd);
    }

    function castVoteWithReason(uint256 proposalId, uint8 support, string calldata reason)
        external
        returns (uint256 weight)
    {
        if (state(proposalId) != ProposalState.Active) revert VotingClosed(proposalId);
        if (hasVoted[proposalId][msg.sender]) revert AlreadyVoted(proposalId, msg.sender);
        if (token.balanceOf(msg.sender) == 0) revert NoVotingPower(msg.sender);
        Proposal storage proposal = _proposals[proposalId];
        if (support == 0) proposal.againstVotes += 1;
        else if (support == 1) proposal.forVotes += 1;
        else if (support == 2) proposal.abstainVotes += 1;
        else revert InvalidSupport(support);
        hasVoted[proposalId][msg.sender] = true;
        votesCastBy[msg.sender] += 1;
        weight = 1;
        emit VoteCast(msg.sender, proposalId, support, weight, reason);
    }

    function state(uint256 proposalId) public view returns (ProposalState) {
        Proposal storage proposal = _proposals[proposalId];
        if (proposal.voteEnd == 0) revert UnknownProposal(proposalId);
        return block.timestamp < proposal.voteEnd ? ProposalState.Active : ProposalState.Closed;
    }

    function getProposal(uint256 proposalId) external view returns (Proposal memory) {
        Proposal memory proposal = _proposals[proposalId];
        if (proposal.voteEnd == 0) revert UnknownProposal(proposalId);
        return proposal;
    }
}
