// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";

/// @title StrategyRegistryV3
/// @notice Holds DNA-encoded strategies, their risk parameters and their lifecycle status.
///
/// Lifecycle. The pipeline runs forward one step at a time:
///   Shadow -> GuardianReview -> PaperTrading -> PendingOracleApproval -> Live
/// Any active state (Shadow to Live) may be Paused; a Paused strategy resumes to the state
/// it was paused from. Any state but Deprecated may be Deprecated, which is terminal.
/// Everything else reverts with IllegalTransition. Only the guardian role moves strategies.
contract StrategyRegistryV3 is AccessControl {
    bytes32 public constant GUARDIAN_ROLE = keccak256("GUARDIAN_ROLE");

    enum Status {
        Shadow,
        GuardianReview,
        PaperTrading,
        PendingOracleApproval,
        Live,
        Paused,
        Deprecated
    }

    struct RiskParams {
        uint256 maxPositionSizePercent; // 1..100, percent of assets under management
        uint256 maxLeverage; // 100..1000, 100 = 1x
        uint256 stopLossPercent; // 50..5000, basis points
        uint256 slippageToleranceBps; // 1..1000
        uint256 correlationThreshold; // 0..100, 70 = 0.7
        uint256 velocityLimit; // >= 1000, USDC wei per period
        bool flashLoansEnabled;
    }

    struct Strategy {
        bytes32 dna;
        address owner;
        uint64 createdAt;
        uint64 lastStatusChange;
        Status status;
        Status pausedFrom;
        string name;
        string description;
        RiskParams risk;
    }

    mapping(bytes32 strategyId => Strategy) private _strategies;
    mapping(address owner => bytes32[]) private _strategiesOf;
    uint256 public totalStrategies;

    error UnknownStrategy(bytes32 strategyId);
    error IllegalTransition(bytes32 strategyId, Status from, Status to);
    error InvalidText(string field);
    error RiskOutOfBounds(string field, uint256 value);

    event StrategySubmitted(bytes32 indexed strategyId, address indexed owner, bytes32 dna, string name);
    event StrategyStatusChanged(bytes32 indexed strategyId, Status from, Status to);

    constructor(address admin) {
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _grantRole(GUARDIAN_ROLE, admin);
    }

    function submit(bytes32 dna, string calldata name, string calldata description, RiskParams calldata risk)
        external
        returns (bytes32 strategyId)
    {
        uint256 nameLength = bytes(name).length;
        if (nameLength < 3 || nameLength > 400) revert InvalidText("name");
        uint256 descriptionLength = bytes(description).length;
        if (descriptionLength < 10 || descriptionLength > 8000) revert InvalidText("description");
        _checkRisk(risk);

        bytes32[] storage owned = _strategiesOf[msg.sender];
        strategyId = keccak256(abi.encode(block.chainid, address(this), msg.sender, owned.length, dna));
        owned.push(strategyId);
        totalStrategies += 1;

        Strategy storage strategy = _strategies[strategyId];
        strategy.dna = dna;
        strategy.owner = msg.sender;
        strategy.createdAt = uint64(block.timestamp);
        strategy.lastStatusChange = uint64(block.timestamp);
        strategy.status = Status.Shadow;
        strategy.pausedFrom = Status.Shadow;
        strategy.name = name;
        strategy.description = description;
        strategy.risk = risk;
        emit StrategySubmitted(strategyId, msg.sender, dna, name);
    }

    function setStatus(bytes32 strategyId, Status to) external onlyRole(GUARDIAN_ROLE) {
        Strategy storage strategy = _strategies[strategyId];
        if (strategy.owner == address(0)) revert UnknownStrategy(strategyId);
        Status from = strategy.status;
        if (!canTransition(from, to, strategy.pausedFrom)) revert IllegalTransition(strategyId, from, to);
        if (to == Status.Paused) strategy.pausedFrom = from;
        strategy.status = to;
        strategy.lastStatusChange = uint64(block.timestamp);
        emit StrategyStatusChanged(strategyId, from, to);
    }

    /// @notice Whether `from` may move to `to`; `pausedFrom` matters only when `from` is Paused.
    function canTransition(Status from, Status to, Status pausedFrom) public pure returns (bool) {
        if (from == Status.Deprecated) return false;
        if (to == Status.Deprecated) return true;
        if (from == Status.Paused) return to == pausedFrom;
        if (to == Status.Paused) return true;
        return uint8(to) == uint8(from) + 1 && to <= Status.Live;
    }

    function getStrategy(bytes32 strategyId) external view returns (Strategy memory) {
        Strategy memory strategy = _strategies[strategyId];
        if (strategy.owner == address(0)) revert UnknownStrategy(strategyId);
        return strategy;
    }

    function strategiesOf(address owner) external view returns (bytes32[] memory) {
        return _strategiesOf[owner];
    }

    function strategyCountOf(address owner) external view returns (uint256) {
        return _strategiesOf[owner].length;
    }

    function _checkRisk(RiskParams calldata risk) private pure {
        _bound("max_position_size_percent", risk.maxPositionSizePercent, 1, 100);
        _bound("max_leverage", risk.maxLeverage, 100, 1000);
        _bound("stop_loss_percent", risk.stopLossPercent, 50, 5000);
        _bound("slippage_tolerance_bps", risk.slippageToleranceBps, 1, 1000);
        _bound("correlation_threshold", risk.correlationThreshold, 0, 100);
        _bound("velocity_limit", risk.velocityLimit, 1000, type(uint256).max);
    }

    function _bound(string memory field, uint256 value, uint256 min, uint256 max) private pure {
        if (value < min || value > max) revert RiskOutOfBounds(field, value);
    }
}
