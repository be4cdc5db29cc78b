// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";

interface IMintableToken {
    function mint(address to, uint256 amount) external;
}

interface IAgentPassMinter {
    function mint(address to) external returns (uint256 tokenId);
}

/// @title AgentOnboarding
/// @notice Onboards newly registered agents in one transaction, however many there are:
/// each agent's server-side wallet receives ETH for gas, test USDC and protocol tokens, and
/// the agent pass is minted to the wallet the agent registered with. It records every wallet
/// it has funded, so the sandbox can check at start that its database knows every agent the
/// chain holds, and never hands a funded wallet to a second agent.
contract AgentOnboarding is AccessControl {
    bytes32 public constant OPERATOR_ROLE = keccak256("OPERATOR_ROLE");

    IMintableToken public immutable usdc;
    IMintableToken public immutable protocolToken;
    IAgentPassMinter public immutable agentPass;
    uint256 public immutable ethPerAgent;
    uint256 public immutable usdcPerAgent;
    uint256 public immutable tokensPerAgent;

    /// @notice How many agent wallets have been onboarded.
    uint256 public onboardedCount;
    mapping(address agentWallet => bool) public onboarded;

    error LengthMismatch(uint256 agentWallets, uint256 registeredWallets);
    error WrongValue(uint256 sent, uint256 expected);
    error AlreadyOnboarded(address agentWallet);
    error EthTransferFailed(address agentWallet);

    event AgentOnboarded(address indexed agentWallet, address indexed registeredWallet, uint256 passId);

    constructor(
        IMintableToken usdc_,
        IMintableToken protocolToken_,
        IAgentPassMinter agentPass_,
        uint256 ethPerAgent_,
        uint256 usdcPerAgent_,
        uint256 tokensPerAgent_,
        address admin
    ) {
        usdc = usdc_;
        protocolToken = protocolToken_;
        agentPass = agentPass_;
        ethPerAgent = ethPerAgent_;
        usdcPerAgent = usdcPerAgent_;
        tokensPerAgent = tokensPerAgent_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _grantRole(OPERATOR_ROLE, admin);
    }

    /// @notice Funds `agentWallets[i]` and mints a pass to `registeredWallets[i]`, for every i.
    /// `msg.value` must be exactly `ethPerAgent` times the number of agents.
    function onboard(address[] calldata agentWallets, address[] calldata registeredWallets)
        external
        payable
        onlyRole(OPERATOR_ROLE)
    {
        uint256 count = agentWallets.length;
        if (registeredWallets.length != count) revert LengthMismatch(count, registeredWallets.length);
        if (msg.value != ethPerAgent * count) revert WrongValue(msg.value, ethPerAgent * count);
        for (uint256 i = 0; i < count; i++) {
            address agentWallet = agentWallets[i];
            if (onboarded[agentWallet]) revert AlreadyOnboarded(agentWallet);
            onboarded[agentWallet] = true;
            (bool sent,) = agentWallet.call{value: ethPerAgent}("");
            if (!sent) revert EthTransferFailed(agentWallet);
            usdc.mint(agentWallet, usdcPerAgent);
            protocolToken.mint(agentWallet, tokensPerAgent);
            uint256 passId = agentPass.mint(registeredWallets[i]);
            emit AgentOnboarded(agentWallet, registeredWallets[i], passId);
        }
        onboardedCount += count;
    }
}
