// Span and trace ids, random as the SDK's, except that the next span may be given ids decided elsewhere: in
// clustered mode the coordinator decides an execution's root span when its poll claims it (the poll span is its
// child), and the replica that runs the execution later makes that same root span, from the job's traceparent.
import { RandomIdGenerator, type IdGenerator } from '@opentelemetry/sdk-trace-base';

export class PrimedIdGenerator implements IdGenerator {
  readonly #random = new RandomIdGenerator();
  #traceId: string | undefined;
  #spanId: string | undefined;

  /** The next root span made gets these ids (the SDK asks for them synchronously in startSpan). */
  prime(traceId: string, spanId: string): void {
    this.#traceId = traceId;
    this.#spanId = spanId;
  }

  generateTraceId(): string {
    const id = this.#traceId ?? this.#random.generateTraceId();
    this.#traceId = undefined;
    return id;
  }

  generateSpanId(): string {
    const id = this.#spanId ?? this.#random.generateSpanId();
    this.#spanId = undefined;
    return id;
  }
}
