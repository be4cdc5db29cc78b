// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC4626} from "@openzeppelin/contracts/token/ERC20/extensions/ERC4626.sol";

interface IMintable {
    function mint(address to, uint256 amount) external;
}

/// @title SandboxVault
/// @notice An ERC-4626 vault over MockUSDC whose yield accrues with chain time.
/// Yield is simple interest on the assets the vault holds, at `apyBps`, since the last
/// accrual: held * apyBps * elapsed / (10_000 * 365 days). `totalAssets()` includes it as a
/// view, so the share price rises with every block. Each deposit or withdrawal first mints
/// the pending yield into the vault, which compounds it from then on.
///
/// Every accrual emits YieldAccrued, even of nothing, and the constructor emits ApyChanged and
/// YieldAccrued: with the asset's Transfer events and the share's, a reader of the logs alone
/// knows the vault's state at every moment (its assets, yield rate, last accrual and supply),
/// and so its totalAssets() and share price at any past time, which the data API's history
/// and APYs are computed from.
contract SandboxVault is ERC4626, AccessControl {
    uint256 public constant MAX_APY_BPS = 100_000;

    /// @notice The identifier the service's deposit endpoint accepts, e.g. "conservative".
    string public vaultId;
    uint256 public apyBps;
    uint256 public lastAccrual;
    /// @notice Every asset ever deposited (not counting yield); the service's total deposits.
    uint256 public totalDeposited;

    error ApyTooHigh(uint256 apyBps);

    event YieldAccrued(uint256 assets, uint256 timestamp);
    event ApyChanged(uint256 apyBps);

    constructor(IERC20 usdc, string memory name_, string memory symbol_, string memory vaultId_, uint256 apyBps_, address admin)
        ERC20(name_, symbol_)
        ERC4626(usdc)
    {
        if (apyBps_ > MAX_APY_BPS) revert ApyTooHigh(apyBps_);
        vaultId = vaultId_;
        apyBps = apyBps_;
        lastAccrual = block.timestamp;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        emit ApyChanged(apyBps_);
        emit YieldAccrued(0, block.timestamp);
    }

    /// @notice The assets that earn yield and back the shares: what the vault holds, less any
    /// it holds for others (an asynchronous vault's requests).
    function _heldAssets() internal view virtual returns (uint256) {
        return IERC20(asset()).balanceOf(address(this));
    }

    /// @notice Yield earned since the last accrual and not yet minted into the vault.
    function pendingYield() public view returns (uint256) {
        uint256 held = _heldAssets();
        return (held * apyBps * (block.timestamp - lastAccrual)) / (10_000 * 365 days);
    }

    function totalAssets() public view override returns (uint256) {
        return _heldAssets() + pendingYield();
    }

    /// @notice Mints the pending yield into the vault. Anyone may call it; nothing changes
    /// for holders, whose shares were already worth it.
    function accrue() public {
        uint256 earned = pendingYield();
        lastAccrual = block.timestamp;
        if (earned > 0) IMintable(asset()).mint(address(this), earned);
        emit YieldAccrued(earned, block.timestamp);
    }

    function setApy(uint256 apyBps_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (apyBps_ > MAX_APY_BPS) revert ApyTooHigh(apyBps_);
        accrue();
        apyBps = apyBps_;
        emit ApyChanged(apyBps_);
    }

    function _deposit(address caller, address receiver, uint256 assets, uint256 shares) internal override {
        accrue();
        totalDeposited += assets;
        super._deposit(caller, receiver, assets, shares);
    }

    function _withdraw(address caller, address receiver, address owner, uint256 assets, uint256 shares)
        internal
        override
    {
        accrue();
        super._withdraw(caller, receiver, owner, assets, shares);
    }
}
