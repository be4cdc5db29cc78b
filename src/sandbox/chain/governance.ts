import { type Address, type Hash, parseEventLogs, type TransactionReceipt } from 'viem';
import { HttpError } from '../errors.ts';
import type { StoreTx } from '../store/index.ts';
import { AgentGovernor } from './contracts/artifacts.ts';
import { revertReason } from './errors.ts';
import type { SandboxChain } from './index.ts';

const SUPPORT_LABELS = ['against', 'for', 'abstain'] as const;

/**
 * The time the next block will carry: the latest block's, or sandbox time if later (after
 * an idle spell no block has been mined for a while, but chain time has moved on).
 */
function chainNow(chain: SandboxChain, latestBlockTimestamp: bigint): bigint {
  const now = BigInt(chain.nowSeconds());
  return now > latestBlockTimestamp ? now : latestBlockTimestamp;
}

/** Opens a proposal for voting at once (sandbox admin). Ids count up from 1. */
export async function createProposal(
  chain: SandboxChain,
  title: string,
  description: string,
  record: (tx: StoreTx, proposal: CreatedProposal) => Promise<void> = async () => {},
): Promise<CreatedProposal> {
  const governor = chain.deployment.governor;
  const { recorded } = await chain.treasury.exclusive((session) =>
    session.send(
      [
        {
          label: 'proposal',
          address: governor,
          abi: AgentGovernor.abi,
          functionName: 'propose',
          args: [title, description],
        },
      ],
      async (tx, [receipt]) => {
        const created = createdFrom(receipt as TransactionReceipt);
        await record(tx, created);
        return created;
      },
    ),
  );
  return recorded;
}

export interface CreatedProposal {
  proposal_id: number;
  tx_hash: Hash;
  vote_end: number;
}

function createdFrom(receipt: TransactionReceipt): CreatedProposal {
  const created = parseEventLogs({
    abi: AgentGovernor.abi,
    logs: receipt.logs,
    eventName: 'ProposalCreated',
  })[0];
  if (!created) {
    throw new HttpError(502, 'the governor confirmed the proposal but emitted no ProposalCreated');
  }
  return {
    proposal_id: Number(created.args.proposalId),
    tx_hash: receipt.transactionHash,
    vote_end: Number(created.args.voteEnd),
  };
}

function readProposal(chain: SandboxChain, proposalId: bigint) {
  return chain.publicClient.readContract({
    address: chain.deployment.governor,
    abi: AgentGovernor.abi,
    functionName: 'getProposal',
    args: [proposalId],
  });
}

/** Proposals still open for votes at the chain's latest block, newest first. */
export async function activeProposals(chain: SandboxChain) {
  const { publicClient } = chain;
  const [count, block] = await Promise.all([
    publicClient.readContract({
      address: chain.deployment.governor,
      abi: AgentGovernor.abi,
      functionName: 'proposalCount',
    }),
    publicClient.getBlock(),
  ]);
  const ids = Array.from({ length: Number(count) }, (_, i) => count - BigInt(i));
  const proposals = await Promise.all(ids.map((id) => readProposal(chain, id)));
  return proposals
    .map((proposal, i) => ({ proposal, id: ids[i] as bigint }))
    .filter(({ proposal }) => proposal.voteEnd > chainNow(chain, block.timestamp))
    .map(({ proposal, id }) => ({
      proposal_id: Number(id),
      title: proposal.title,
      description: proposal.description,
      proposer: proposal.proposer,
      status: 'active',
      vote_start: Number(proposal.voteStart),
      vote_end: Number(proposal.voteEnd),
      votes: {
        for: Number(proposal.forVotes),
        against: Number(proposal.againstVotes),
        abstain: Number(proposal.abstainVotes),
      },
    }));
}

/**
 * Casts the agent's vote from its server-side wallet. An unknown proposal is 404; a closed
 * one or a second vote is 409, found before anything is sent.
 */
export async function castVote(
  chain: SandboxChain,
  walletIndex: number,
  vote: { proposalId: number; support: 0 | 1 | 2; reason: string },
  record: (tx: StoreTx, cast: CastVote) => Promise<void>,
): Promise<CastVote> {
  const governor = chain.deployment.governor;
  const id = BigInt(vote.proposalId);
  return chain.wallet(walletIndex).exclusive(async (session) => {
    let proposal: Awaited<ReturnType<typeof readProposal>>;
    try {
      proposal = await readProposal(chain, id);
    } catch (error) {
      if (revertReason(error).startsWith('UnknownProposal')) {
        throw new HttpError(404, `no proposal ${vote.proposalId}`);
      }
      throw error;
    }
    const block = await chain.publicClient.getBlock();
    if (proposal.voteEnd <= chainNow(chain, block.timestamp)) {
      throw new HttpError(409, `voting on proposal ${vote.proposalId} has ended`);
    }
    const voted = await chain.publicClient.readContract({
      address: governor,
      abi: AgentGovernor.abi,
      functionName: 'hasVoted',
      args: [id, session.address],
    });
    if (voted) {
      throw new HttpError(409, `this agent has already voted on proposal ${vote.proposalId}`);
    }
    const { recorded } = await session.send(
      [
        {
          label: 'vote',
          address: governor,
          abi: AgentGovernor.abi,
          functionName: 'castVoteWithReason',
          args: [id, vote.support, vote.reason],
        },
      ],
      async (tx, [receipt]) => {
        const cast: CastVote = {
          supportLabel: SUPPORT_LABELS[vote.support],
          txHash: (receipt as TransactionReceipt).transactionHash,
          blockNumber: Number((receipt as TransactionReceipt).blockNumber),
        };
        await record(tx, cast);
        return cast;
      },
    );
    return recorded;
  });
}

export interface CastVote {
  supportLabel: (typeof SUPPORT_LABELS)[number];
  txHash: Hash;
  blockNumber: number;
}

export function votesCastBy(chain: SandboxChain, voter: Address): Promise<bigint> {
  return chain.publicClient.readContract({
    address: chain.deployment.governor,
    abi: AgentGovernor.abi,
    functionName: 'votesCastBy',
    args: [voter],
  });
}
