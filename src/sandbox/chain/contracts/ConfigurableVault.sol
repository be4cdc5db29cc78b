// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {SandboxVault} from "./SandboxVault.sol";

/// @title ConfigurableVault
/// @notice The sandbox's ERC-7540 vault: deposits and redemptions are asynchronous. A
/// controller requests (`requestDeposit`, `requestRedeem`); the vault's operator fulfils each
/// request once `fulfillmentDelay` seconds have passed since it was made, at the share price
/// of that moment; the controller (or an operator it approved) then claims with the ERC-4626
/// functions (`deposit`/`mint` for shares, `redeem`/`withdraw` for assets).
///
/// Requests have their own ids (from 1). Assets waiting on a deposit request and assets
/// fulfilled for a redemption but not yet claimed are held apart: they earn no yield and do
/// not count in totalAssets(). Fulfilled deposit shares wait in the vault until claimed.
/// Claims take from the controller's fulfilled total, in proportion (so the per-request
/// claimable views are approximate once a controller has claimed part of its total).
contract ConfigurableVault is SandboxVault {
    using Math for uint256;

    bytes32 public constant OPERATOR_ROLE = keccak256("OPERATOR_ROLE");

    struct Request {
        address controller;
        bool isDeposit;
        bool fulfilled;
        uint64 requestedAt;
        /// Assets for a deposit request, shares for a redemption.
        uint256 amount;
    }

    struct Claimable {
        uint256 depositAssets;
        uint256 depositShares;
        uint256 redeemAssets;
        uint256 redeemShares;
    }

    /// @notice Seconds a request waits before the operator may fulfil it.
    uint256 public fulfillmentDelay;
    uint256 public lastRequestId;
    /// @notice Assets held for others: pending deposits and fulfilled, unclaimed redemptions.
    uint256 public reservedAssets;

    mapping(uint256 requestId => Request) public requests;
    mapping(address controller => uint256) public pendingDepositAssets;
    mapping(address controller => uint256) public pendingRedeemShares;
    mapping(address controller => Claimable) public claimable;
    mapping(address controller => mapping(address operator => bool)) public isOperator;

    error AsyncVault();
    error UnknownRequest(uint256 requestId);
    error NotController(address caller, address controller);
    error ZeroAmount();
    error ExceedsClaimable(uint256 requested, uint256 claimable);
    error ZeroController();
    error VaultAsReceiver();

    event DepositRequest(
        address indexed controller, address indexed owner, uint256 indexed requestId, address sender, uint256 assets
    );
    event RedeemRequest(
        address indexed controller, address indexed owner, uint256 indexed requestId, address sender, uint256 shares
    );
    event DepositFulfilled(address indexed controller, uint256 indexed requestId, uint256 assets, uint256 shares);
    event RedeemFulfilled(address indexed controller, uint256 indexed requestId, uint256 assets, uint256 shares);
    event OperatorSet(address indexed controller, address indexed operator, bool approved);
    event FulfillmentDelayChanged(uint256 fulfillmentDelay);

    constructor(
        IERC20 usdc,
        string memory name_,
        string memory symbol_,
        string memory vaultId_,
        uint256 apyBps_,
        uint256 fulfillmentDelay_,
        address admin
    ) SandboxVault(usdc, name_, symbol_, vaultId_, apyBps_, admin) {
        fulfillmentDelay = fulfillmentDelay_;
        _grantRole(OPERATOR_ROLE, admin);
        emit FulfillmentDelayChanged(fulfillmentDelay_);
    }

    function supportsInterface(bytes4 interfaceId) public view override returns (bool) {
        return interfaceId == 0xe3bc4e65 // ERC-7540 operator methods
            || interfaceId == 0xce3bbe50 // ERC-7540 asynchronous deposit
            || interfaceId == 0x620ee8e4 // ERC-7540 asynchronous redemption
            || interfaceId == 0x2f0a18c5 // ERC-7575
            || super.supportsInterface(interfaceId);
    }

    /// @notice ERC-7575: the share token is the vault itself.
    function share() external view returns (address) {
        return address(this);
    }

    function setFulfillmentDelay(uint256 seconds_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        fulfillmentDelay = seconds_;
        emit FulfillmentDelayChanged(seconds_);
    }

    function setOperator(address operator, bool approved) external returns (bool) {
        isOperator[msg.sender][operator] = approved;
        emit OperatorSet(msg.sender, operator, approved);
        return true;
    }

    // ---- Requests ----

    function requestDeposit(uint256 assets, address controller, address owner) external returns (uint256 requestId) {
        if (assets == 0) revert ZeroAmount();
        if (controller == address(0)) revert ZeroController();
        _checkController(owner);
        SafeERC20.safeTransferFrom(IERC20(asset()), owner, address(this), assets);
        reservedAssets += assets;
        pendingDepositAssets[controller] += assets;
        requestId = _newRequest(controller, true, assets);
        emit DepositRequest(controller, owner, requestId, msg.sender, assets);
    }

    function requestRedeem(uint256 shares, address controller, address owner) external returns (uint256 requestId) {
        if (shares == 0) revert ZeroAmount();
        if (controller == address(0)) revert ZeroController();
        if (msg.sender != owner && !isOperator[owner][msg.sender]) _spendAllowance(owner, msg.sender, shares);
        _transfer(owner, address(this), shares);
        pendingRedeemShares[controller] += shares;
        requestId = _newRequest(controller, false, shares);
        emit RedeemRequest(controller, owner, requestId, msg.sender, shares);
    }

    function pendingDepositRequest(uint256 requestId, address controller) external view returns (uint256) {
        Request storage request = requests[requestId];
        return request.controller == controller && request.isDeposit && !request.fulfilled ? request.amount : 0;
    }

    function claimableDepositRequest(uint256 requestId, address controller) external view returns (uint256) {
        Request storage request = requests[requestId];
        if (request.controller != controller || !request.isDeposit || !request.fulfilled) return 0;
        return Math.min(request.amount, claimable[controller].depositAssets);
    }

    function pendingRedeemRequest(uint256 requestId, address controller) external view returns (uint256) {
        Request storage request = requests[requestId];
        return request.controller == controller && !request.isDeposit && !request.fulfilled ? request.amount : 0;
    }

    function claimableRedeemRequest(uint256 requestId, address controller) external view returns (uint256) {
        Request storage request = requests[requestId];
        if (request.controller != controller || request.isDeposit || !request.fulfilled) return 0;
        return Math.min(request.amount, claimable[controller].redeemShares);
    }

    // ---- Fulfilment, by the operator ----

    /// @notice When the operator may fulfil `requestId` (0 once it is fulfilled).
    function fulfillableAt(uint256 requestId) public view returns (uint256) {
        Request storage request = requests[requestId];
        if (request.controller == address(0)) revert UnknownRequest(requestId);
        if (request.fulfilled) return 0;
        return uint256(request.requestedAt) + fulfillmentDelay;
    }

    /// @notice Fulfils each request that is due. An id that is unknown, already fulfilled or not
    /// yet due is skipped, so one such id never holds up the others; returns how many were.
    function fulfill(uint256[] calldata requestIds) external onlyRole(OPERATOR_ROLE) returns (uint256 fulfilled) {
        accrue();
        for (uint256 i = 0; i < requestIds.length; i++) {
            if (_fulfill(requestIds[i])) fulfilled += 1;
        }
    }

    function _fulfill(uint256 requestId) private returns (bool) {
        Request storage request = requests[requestId];
        if (request.controller == address(0) || request.fulfilled) return false;
        if (block.timestamp < uint256(request.requestedAt) + fulfillmentDelay) return false;
        request.fulfilled = true;
        Claimable storage owed = claimable[request.controller];
        if (request.isDeposit) {
            uint256 assets = request.amount;
            // Priced before the assets join the vault's, as a synchronous deposit is.
            uint256 shares = _convertToShares(assets, Math.Rounding.Floor);
            pendingDepositAssets[request.controller] -= assets;
            reservedAssets -= assets;
            totalDeposited += assets;
            _mint(address(this), shares);
            owed.depositAssets += assets;
            owed.depositShares += shares;
            emit DepositFulfilled(request.controller, requestId, assets, shares);
        } else {
            uint256 shares = request.amount;
            uint256 assets = _convertToAssets(shares, Math.Rounding.Floor);
            pendingRedeemShares[request.controller] -= shares;
            _burn(address(this), shares);
            reservedAssets += assets;
            owed.redeemAssets += assets;
            owed.redeemShares += shares;
            emit RedeemFulfilled(request.controller, requestId, assets, shares);
        }
        return true;
    }

    // ---- Claims (ERC-4626 functions, ERC-7540 semantics) ----

    function maxDeposit(address controller) public view override returns (uint256) {
        return claimable[controller].depositAssets;
    }

    function maxMint(address controller) public view override returns (uint256) {
        return claimable[controller].depositShares;
    }

    function maxWithdraw(address controller) public view override returns (uint256) {
        return claimable[controller].redeemAssets;
    }

    function maxRedeem(address controller) public view override returns (uint256) {
        return claimable[controller].redeemShares;
    }

    function previewDeposit(uint256) public pure override returns (uint256) {
        revert AsyncVault();
    }

    function previewMint(uint256) public pure override returns (uint256) {
        revert AsyncVault();
    }

    function previewWithdraw(uint256) public pure override returns (uint256) {
        revert AsyncVault();
    }

    function previewRedeem(uint256) public pure override returns (uint256) {
        revert AsyncVault();
    }

    function deposit(uint256 assets, address receiver) public override returns (uint256) {
        return deposit(assets, receiver, msg.sender);
    }

    function mint(uint256 shares, address receiver) public override returns (uint256) {
        return mint(shares, receiver, msg.sender);
    }

    /// @notice Claims the shares of `assets` of the controller's fulfilled deposits.
    function deposit(uint256 assets, address receiver, address controller) public returns (uint256 shares) {
        _checkController(controller);
        Claimable storage owed = claimable[controller];
        if (assets == 0) revert ZeroAmount();
        if (assets > owed.depositAssets) revert ExceedsClaimable(assets, owed.depositAssets);
        shares = owed.depositShares.mulDiv(assets, owed.depositAssets, Math.Rounding.Floor);
        _claimDeposit(owed, controller, receiver, assets, shares);
    }

    /// @notice Claims `shares` of the controller's fulfilled deposits.
    function mint(uint256 shares, address receiver, address controller) public returns (uint256 assets) {
        _checkController(controller);
        Claimable storage owed = claimable[controller];
        if (shares == 0) revert ZeroAmount();
        if (shares > owed.depositShares) revert ExceedsClaimable(shares, owed.depositShares);
        assets = owed.depositAssets.mulDiv(shares, owed.depositShares, Math.Rounding.Ceil);
        _claimDeposit(owed, controller, receiver, assets, shares);
    }

    /// @notice Claims the assets of `shares` of the controller's fulfilled redemptions.
    function redeem(uint256 shares, address receiver, address controller) public override returns (uint256 assets) {
        _checkController(controller);
        Claimable storage owed = claimable[controller];
        if (shares == 0) revert ZeroAmount();
        if (shares > owed.redeemShares) revert ExceedsClaimable(shares, owed.redeemShares);
        assets = owed.redeemAssets.mulDiv(shares, owed.redeemShares, Math.Rounding.Floor);
        _claimRedeem(owed, controller, receiver, assets, shares);
    }

    /// @notice Claims `assets` of the controller's fulfilled redemptions.
    function withdraw(uint256 assets, address receiver, address controller)
        public
        override
        returns (uint256 shares)
    {
        _checkController(controller);
        Claimable storage owed = claimable[controller];
        if (assets == 0) revert ZeroAmount();
        if (assets > owed.redeemAssets) revert ExceedsClaimable(assets, owed.redeemAssets);
        // Down, as redeem rounds: the shares (burnt at fulfilment) and the assets reach zero
        // together, so no claimable dust is left that redeem could not take.
        shares = owed.redeemShares.mulDiv(assets, owed.redeemAssets, Math.Rounding.Floor);
        _claimRedeem(owed, controller, receiver, assets, shares);
    }

    function _claimDeposit(
        Claimable storage owed,
        address controller,
        address receiver,
        uint256 assets,
        uint256 shares
    ) private {
        if (receiver == address(this)) revert VaultAsReceiver();
        owed.depositAssets -= assets;
        owed.depositShares -= shares;
        _transfer(address(this), receiver, shares);
        emit Deposit(controller, receiver, assets, shares);
    }

    function _claimRedeem(
        Claimable storage owed,
        address controller,
        address receiver,
        uint256 assets,
        uint256 shares
    ) private {
        if (receiver == address(this)) revert VaultAsReceiver();
        owed.redeemAssets -= assets;
        owed.redeemShares -= shares;
        reservedAssets -= assets;
        SafeERC20.safeTransfer(IERC20(asset()), receiver, assets);
        emit Withdraw(msg.sender, receiver, controller, assets, shares);
    }

    // ---- Internals ----

    function _heldAssets() internal view override returns (uint256) {
        return IERC20(asset()).balanceOf(address(this)) - reservedAssets;
    }

    function _newRequest(address controller, bool isDeposit, uint256 amount) private returns (uint256 requestId) {
        requestId = ++lastRequestId;
        requests[requestId] = Request({
            controller: controller,
            isDeposit: isDeposit,
            fulfilled: false,
            requestedAt: uint64(block.timestamp),
            amount: amount
        });
    }

    function _checkController(address controller) private view {
        if (msg.sender != controller && !isOperator[controller][msg.sender]) {
            revert NotController(msg.sender, controller);
        }
    }
}
