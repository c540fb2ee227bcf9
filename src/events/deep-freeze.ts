// Freezes an event payload and everything it holds, so that a listener that writes one throws (TypeError in
// strict mode) instead of changing what the next listener, or the emitter, sees. Development builds only.

export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  // A typed array with elements cannot be frozen; a payload holds none, but one must not fail an emit.
  if (ArrayBuffer.isView(value)) return value;
  Object.freeze(value);
  for (const key of Reflect.ownKeys(value)) {
    deepFreeze((value as Record<PropertyKey, unknown>)[key]);
  }
  return value;
}
