// Who asks for a request: its class decides its place in the budget's queue (request-queue.ts), so reports
// never wait behind polls, and whether it may use the month's report reserve.
import type { Operation } from '../api/types.ts';

/**
 * Who asks: decides the order of the queue and which share of the month may be used. `handler`: a handler's
 * own calls through `ctx.service`, below the daemon's reports and control requests, above idle polls; like
 * every class but `report`, it may not use the report reserve.
 */
export type RequestClass = 'report' | 'control' | 'handler' | 'poll';

export function classOf(operation: Operation): RequestClass {
  // The reporter reads an execution back (executions.get) only to learn whether a report the service refused
  // was in fact applied: that read finishes a report, so it needs the report reserve as much as the report
  // does. As 'control' it would wait for the month's end once only the reserve is left, holding its slot.
  if (operation === 'executions.report' || operation === 'executions.get') return 'report';
  if (operation === 'tasks.poll') return 'poll';
  return 'control';
}
