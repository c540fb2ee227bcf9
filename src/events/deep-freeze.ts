// Freezes an event payload and the plain data it holds (objects and arrays), so that a listener that writes
// one throws (TypeError in strict mode) instead of changing what the next listener, or the emitter, sees.
// Instances of classes are left as they are: an error in a `response` event is still thrown, and its
// thrower's, after the event. Development builds only (see WorkerEvents).

export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  if (!Array.isArray(value)) {
    const prototype: unknown = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) return value;
  }
  Object.freeze(value);
  for (const key of Reflect.ownKeys(value)) deepFreeze((value as Record<PropertyKey, unknown>)[key]);
  return value;
}
