// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title MockUSDC
/// @notice The sandbox's test USDC: 6 decimals, minted by the sandbox treasury and by the
/// vaults (which mint their own yield). An admin can freeze an account, which makes its
/// approvals and transfers revert: that is how tests cause a real onchain failure.
contract MockUSDC is ERC20, AccessControl {
    bytes32 public constant MINTER_ROLE = keccak256("MINTER_ROLE");

    mapping(address account => bool) public frozen;

    error AccountFrozen(address account);

    event FrozenSet(address indexed account, bool frozen);

    constructor(address admin) ERC20("Mock USD Coin", "USDC") {
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _grantRole(MINTER_ROLE, admin);
    }

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    function mint(address to, uint256 amount) external onlyRole(MINTER_ROLE) {
        _mint(to, amount);
    }

    function setFrozen(address account, bool value) external onlyRole(DEFAULT_ADMIN_ROLE) {
        frozen[account] = value;
        emit FrozenSet(account, value);
    }

    function _approve(address owner, address spender, uint256 value, bool emitEvent) internal override {
        if (frozen[owner]) revert AccountFrozen(owner);
        super._approve(owner, spender, value, emitEvent);
    }

    function _update(address from, address to, uint256 value) internal override {
        if (frozen[from]) revert AccountFrozen(from);
        super._update(from, to, value);
    }
}
