import {
  type ASTVisitor,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  GraphQLError,
  type GraphQLSchema,
  Kind,
  type SelectionSetNode,
  type ValidationContext,
  type ValueNode,
} from 'graphql';
import type { GraphqlLimits } from '../../api/schemas/index.ts';
import {
  DATA_PAGE_DEFAULT_LIMIT,
  GRAPHQL_INTERVALS,
  GRAPHQL_PERIODS,
  HISTORY_INTERVALS,
  HISTORY_MAX_POINTS,
  HISTORY_PERIODS,
} from '../../api/schemas/index.ts';
import { DataApiError } from '../errors.ts';
import { graphqlError } from './errors.ts';

/**
 * Validation rules that bound what one document may ask for, run with graphql-js's own on
 * every query and subscription:
 *
 * - depth: nested selections under an operation (fragments followed);
 * - aliases: aliased fields in the whole document;
 * - cost: the objects an answer can hold. A field that answers an object costs 1; one that
 *   answers a list costs its longest length (userTransactions its `limit`, vaultHistory the
 *   points it will answer now, the others the size below); every field below a list costs
 *   that many times over.
 *   Scalars are free. Introspection is counted for depth and aliases only.
 */

/** The longest a list field can be, where no argument says (the sandbox has 6 vaults). */
const LIST_SIZES: Record<string, number> = {
  vaults: 10,
  strategies: 100,
  userPositions: 10,
  nodes: 100,
};
const DEFAULT_LIST_SIZE = 100;
const DAY = 86_400;

function tooComplex(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'QUERY_TOO_COMPLEX' } });
}

/** An argument's literal value; undefined when it is a variable (which counts as its worst case). */
function argument(field: FieldNode, name: string): unknown {
  const node = field.arguments?.find((arg) => arg.name.value === name)?.value;
  return node && literalOf(node);
}

function literalOf(node: ValueNode): unknown {
  switch (node.kind) {
    case Kind.INT:
      return Number(node.value);
    case Kind.STRING:
    case Kind.ENUM:
      return node.value;
    default:
      return undefined;
  }
}

/** A vault as vaultHistory's cost needs it: when its history starts. */
export interface HistorySource {
  /** The index's "now" (the last indexed block's time). */
  now(): number;
  /** The creation time of the vault at `address`, or of every vault when it is undefined. */
  createdAt(address: string | undefined): number[];
}

/**
 * The points vaultHistory answers for a vault created at `createdAt`, counted as
 * indexer/vaults.ts lists them: one per interval end after the period's start, and now.
 */
export function historyPointCount(
  createdAt: number,
  now: number,
  period: keyof typeof HISTORY_PERIODS,
  interval: keyof typeof HISTORY_INTERVALS,
): number {
  const step = HISTORY_INTERVALS[interval];
  const days = HISTORY_PERIODS[period];
  const start = days === null ? createdAt : Math.max(createdAt, now - days * DAY);
  const first = (Math.floor(start / step) + 1) * step;
  return (first < now ? Math.ceil((now - first) / step) : 0) + 1;
}

/** How many items a list field can answer. */
function listSize(field: FieldNode, limits: GraphqlLimits, history: HistorySource): number {
  const name = field.name.value;
  if (name === 'userTransactions') {
    const given = argument(field, 'limit');
    if (given === undefined) {
      // Absent: the default page; a variable: the largest.
      const node = field.arguments?.find((arg) => arg.name.value === 'limit');
      return node ? limits.maxLimit : DATA_PAGE_DEFAULT_LIMIT;
    }
    const limit = Number(given);
    return Number.isFinite(limit) && limit > 0 ? Math.min(limit, limits.maxLimit) : 1;
  }
  if (name === 'vaultHistory') {
    // What it will answer now, which grows with chain time for ALL. A variable counts as its
    // worst case: every vault, its whole history, hourly. Over HISTORY_MAX_POINTS the field
    // answers an error instead, and costs that many.
    const given = argument(field, 'address');
    const period = GRAPHQL_PERIODS[String(argument(field, 'period'))] ?? 'all';
    const interval = GRAPHQL_INTERVALS[String(argument(field, 'interval'))] ?? '1h';
    const now = history.now();
    let points = 1;
    for (const createdAt of history.createdAt(typeof given === 'string' ? given : undefined)) {
      points = Math.max(points, historyPointCount(createdAt, now, period, interval));
    }
    return Math.min(points, HISTORY_MAX_POINTS);
  }
  return LIST_SIZES[name] ?? DEFAULT_LIST_SIZE;
}

/** An operation's depth and cost (see above), by its name ('' when it has none). */
export interface OperationMeasure {
  name: string;
  depth: number;
  cost: number;
}

/**
 * The depth and cost of each operation in `document`: one walk, each fragment measured once
 * (cost is linear in how many times it repeats, and a fragment spread twice in each of 40
 * nested fragments would otherwise be walked 2^40 times: a 2 KB document that held the event
 * loop).
 */
export function measureOperations(
  schema: GraphQLSchema,
  document: DocumentNode,
  limits: GraphqlLimits,
  history: HistorySource,
): OperationMeasure[] {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) {
      fragments.set(definition.name.value, definition);
    }
  }
  const fragmentMeasures = new Map<string, { depth: number; cost: number }>();
  /** Fragments being measured: a cycle is reported by graphql-js's NoFragmentCyclesRule. */
  const measuring = new Set<string>();

  /** Depth and cost of a selection set whose fields each repeat `times` times. */
  function measure(
    set: SelectionSetNode,
    parentType: string,
    times: number,
  ): { depth: number; cost: number } {
    let depth = 0;
    let cost = 0;
    for (const selection of set.selections) {
      let inner: { depth: number; cost: number } | undefined;
      if (selection.kind === Kind.FIELD && !selection.selectionSet) {
        inner = { depth: 1, cost: 0 };
      } else if (selection.kind === Kind.FIELD && selection.selectionSet) {
        const name = selection.name.value;
        const introspection = name.startsWith('__');
        const fieldType = introspection
          ? undefined
          : (
              schema.getType(parentType) as
                | { getFields?: () => Record<string, { type: { toString(): string } }> }
                | undefined
            )?.getFields?.()[name]?.type;
        const typeName = fieldType?.toString() ?? '';
        const isList = typeName.startsWith('[');
        const count = introspection ? 0 : isList ? listSize(selection, limits, history) : 1;
        const below = measure(
          selection.selectionSet,
          typeName.replace(/[[\]!]/g, ''),
          introspection ? 0 : times * Math.max(count, 1),
        );
        inner = { depth: below.depth + 1, cost: times * count + below.cost };
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        inner = measure(
          selection.selectionSet,
          selection.typeCondition?.name.value ?? parentType,
          times,
        );
      } else {
        const name = selection.name.value;
        const fragment = fragments.get(name);
        if (!fragment || measuring.has(name)) continue;
        let unit = fragmentMeasures.get(name);
        if (!unit) {
          measuring.add(name);
          unit = measure(fragment.selectionSet, fragment.typeCondition.name.value, 1);
          measuring.delete(name);
          fragmentMeasures.set(name, unit);
        }
        inner = { depth: unit.depth, cost: times * unit.cost };
      }
      depth = Math.max(depth, inner.depth);
      cost += inner.cost;
    }
    return { depth, cost };
  }

  const measures: OperationMeasure[] = [];
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    const root =
      definition.operation === 'query'
        ? schema.getQueryType()
        : definition.operation === 'subscription'
          ? schema.getSubscriptionType()
          : schema.getMutationType();
    const { depth, cost } = measure(definition.selectionSet, root?.name ?? '', 1);
    measures.push({ name: definition.name?.value ?? '', depth, cost });
  }
  return measures;
}

/**
 * The three limits, as one validation rule (one walk of the document). It runs on every
 * request (nothing caches a document's validation), so vaultHistory is costed at the index's
 * state then.
 */
export function limitsRule(limits: GraphqlLimits, history: HistorySource) {
  return (context: ValidationContext): ASTVisitor => ({
    Document: {
      leave(document) {
        let aliases = 0;
        const countAliases = (set: SelectionSetNode | undefined) => {
          for (const selection of set?.selections ?? []) {
            if (selection.kind === Kind.FIELD && selection.alias) aliases++;
            if (selection.kind !== Kind.FRAGMENT_SPREAD) countAliases(selection.selectionSet);
          }
        };
        for (const definition of document.definitions) {
          if (
            definition.kind === Kind.OPERATION_DEFINITION ||
            definition.kind === Kind.FRAGMENT_DEFINITION
          ) {
            countAliases(definition.selectionSet);
          }
        }
        if (aliases > limits.maxAliases) {
          context.reportError(
            tooComplex(
              `the document has ${aliases} aliases; at most ${limits.maxAliases} are allowed`,
            ),
          );
        }
        let measures: OperationMeasure[];
        try {
          measures = measureOperations(context.getSchema(), document, limits, history);
        } catch (error) {
          // vaultHistory's cost reads the index: while it is rebuilt, that is the answer
          // (INDEX_UNAVAILABLE), as it is for a field that reads it.
          if (!(error instanceof DataApiError && error.code === 'INDEX_UNAVAILABLE')) throw error;
          context.reportError(graphqlError('INDEX_UNAVAILABLE', error.message));
          return;
        }
        for (const { name: given, depth, cost } of measures) {
          const name = given ? ` ${given}` : '';
          if (depth > limits.maxDepth) {
            context.reportError(
              tooComplex(
                `operation${name} is ${depth} levels deep; at most ${limits.maxDepth} are allowed`,
              ),
            );
          }
          if (cost > limits.maxCost) {
            context.reportError(
              tooComplex(
                `operation${name} costs ${cost} (the objects its answer can hold); at most ${limits.maxCost} is allowed: ask for smaller pages or fewer nested lists`,
              ),
            );
          }
        }
      },
    },
  });
}

/**
 * A subscription sent over HTTP (mercurius would run it as a query, and its fields resolve
 * only on a socket): refused with BAD_USER_INPUT. A rule of HTTP requests only; subscribes on
 * a WebSocket are checked without it (routes/graphql.ts).
 */
export function httpOperationsRule(context: ValidationContext): ASTVisitor {
  return {
    OperationDefinition(node) {
      if (node.operation !== 'subscription') return;
      context.reportError(
        new GraphQLError(
          'subscriptions are served over a WebSocket at /graphql (the graphql-transport-ws protocol, as the graphql-ws client speaks it), not over HTTP',
          { nodes: node, extensions: { code: 'BAD_USER_INPUT' } },
        ),
      );
    },
  };
}
