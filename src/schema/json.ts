// The JSON object every part passes around (an execution's input and output, a task's extra fields): on the
// ground floor, so the service client, the events and the runner all import it downward.

/** A JSON object as read from (or sent to) the service: its values are checked where they are used. */
export type JsonObject = { [key: string]: unknown };
