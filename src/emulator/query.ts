// The service's find queries (part 4, "Common conventions"): a tree of nodes `{type, field, value,
// caseSensitive, queries}`, read into a predicate over records, and the list query's page, size and sort.
import { isPlainObject } from '../schema/plain-object.ts';

/** A node that tests one property of a record. */
export type LeafNode =
  | { type: 'eq' | 'search' | 'greaterOrEqual'; field: string; value: string; caseSensitive: boolean }
  | { type: 'in'; field: string; value: string[]; caseSensitive: boolean };

/** A node that combines others. */
export interface GroupNode {
  type: 'and' | 'or';
  queries: QueryNode[];
}

/** One node of a find query, as read. */
export type QueryNode = LeafNode | GroupNode;

const LEAF_TYPES = ['eq', 'search', 'in', 'greaterOrEqual'];
const TYPES = [...LEAF_TYPES, 'and', 'or'];

/**
 * Reads a find body into its query, or says what is wrong with it, naming the node by its path
 * (`queries[1]`). An empty body (`{}`) finds everything.
 */
export function parseQuery(body: unknown, path = 'the query'): QueryNode | undefined | string {
  if (!isPlainObject(body))
    return `${path} must be a JSON object {type, field, value, caseSensitive, queries}.`;
  if (path === 'the query' && Object.keys(body).length === 0) return undefined;
  const { type, field, value, caseSensitive = true, queries } = body;
  if (typeof type !== 'string' || !TYPES.includes(type)) {
    return `${path}: type must be one of ${TYPES.join(', ')}, got ${JSON.stringify(type) ?? 'nothing'}.`;
  }
  if (type === 'and' || type === 'or') {
    if (!Array.isArray(queries) || queries.length === 0) {
      return `${path}: an '${type}' node needs queries, a non-empty array of nodes.`;
    }
    const children: QueryNode[] = [];
    for (const [index, child] of queries.entries()) {
      const parsed = parseQuery(child, `${path === 'the query' ? '' : `${path}.`}queries[${index}]`);
      if (typeof parsed === 'string') return parsed;
      if (parsed !== undefined) children.push(parsed);
    }
    return { type, queries: children };
  }
  if (typeof field !== 'string' || field === '') return `${path}: field must name the property searched.`;
  if (typeof caseSensitive !== 'boolean') return `${path}: caseSensitive must be true or false.`;
  if (type === 'in') {
    if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) {
      return `${path}: an 'in' node's value must be an array of strings.`;
    }
    return { type, field, value: value, caseSensitive };
  }
  if (typeof value !== 'string') return `${path}: value must be a string.`;
  return { type: type as 'eq' | 'search' | 'greaterOrEqual', field, value, caseSensitive };
}

/** Whether a record matches the query; a property the record lacks matches no leaf. */
export function matchesQuery(query: QueryNode | undefined, record: Record<string, unknown>): boolean {
  if (query === undefined) return true;
  if ('queries' in query) {
    const matches = (child: QueryNode) => matchesQuery(child, record);
    return query.type === 'and' ? query.queries.every(matches) : query.queries.some(matches);
  }
  return matchesLeaf(query, record);
}

function matchesLeaf(query: LeafNode, record: Record<string, unknown>): boolean {
  const raw = record[query.field];
  if (raw === undefined || raw === null) return false;
  const fold = (text: string) => (query.caseSensitive ? text : text.toLowerCase());
  const actual = fold(textOf(raw));
  switch (query.type) {
    case 'eq':
      return actual === fold(query.value);
    case 'in':
      return query.value.some((item) => actual === fold(item));
    case 'greaterOrEqual':
      return compareValues(raw, query.value, query.caseSensitive) >= 0;
    case 'search':
      return likePattern(fold(query.value)).test(actual);
  }
}

/** `%` matches any run of characters, as in the service's `search` values (`api%`). */
function likePattern(value: string): RegExp {
  const parts = value.split('%').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${parts.join('.*')}$`, 's');
}

/** Numbers by value, anything else as text (ISO 8601 dates sort as text). */
export function compareValues(a: unknown, b: unknown, caseSensitive = true): number {
  const numbers = [Number(a), Number(b)];
  if (typeof a === 'number' && numbers.every(Number.isFinite)) return numbers[0]! - numbers[1]!;
  const [left, right] = [textOf(a), textOf(b)].map((text) => (caseSensitive ? text : text.toLowerCase()));
  return left! < right! ? -1 : left! > right! ? 1 : 0;
}

/** A property's value as the text a query compares: JSON for an object or array. */
function textOf(value: unknown): string {
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
}

/** A list or find request's page: which records, in which order. */
export interface PageQuery {
  page: number;
  size: number;
  sort?: { field: string; descending: boolean };
}

export const MAX_PAGE_SIZE = 1000;
const DEFAULT_PAGE_SIZE = 10;

/** Reads `page`, `size`, `sort` and `sortOrder`, or says which is wrong. */
export function parsePageQuery(query: URLSearchParams): PageQuery | string {
  const page = query.get('page') ?? '0';
  const size = query.get('size') ?? String(DEFAULT_PAGE_SIZE);
  if (!/^\d+$/.test(page)) return `Page '${page}' is not a page number; pages start at 0.`;
  if (!/^\d+$/.test(size) || Number(size) < 1 || Number(size) > MAX_PAGE_SIZE) {
    return `Page size '${size}' is outside 1..${MAX_PAGE_SIZE}; ask for at most ${MAX_PAGE_SIZE} per page.`;
  }
  const sort = query.get('sort');
  const order = query.get('sortOrder');
  if (order !== null && order !== 'ASC' && order !== 'DESC') {
    return `sortOrder '${order}' is neither ASC nor DESC.`;
  }
  const result: PageQuery = { page: Number(page), size: Number(size) };
  if (sort !== null && sort !== '') result.sort = { field: sort, descending: order === 'DESC' };
  return result;
}

/** The page's records, sorted first when asked (stably: equal values keep creation order). */
export function pageOf<T extends object>(records: T[], { page, size, sort }: PageQuery): T[] {
  const ordered =
    sort === undefined
      ? records
      : records.toSorted((a, b) => {
          const order = compareValues(fieldOf(a, sort.field), fieldOf(b, sort.field));
          return sort.descending ? -order : order;
        });
  return ordered.slice(page * size, (page + 1) * size);
}

function fieldOf(record: object, field: string): unknown {
  return (record as Record<string, unknown>)[field] ?? '';
}
