/**
 * The one view of a goal's steps: what `rx inspect` prints, what `rx inspect --json` encodes and
 * what the web inspector draws, each from the same `Step`s. A step is an iteration's entries in
 * the log's order; a call is one entry from its start to its outcome. The projection
 * (`steps`) is a pure function of the events, so the browser runs it on the events it follows.
 */
export * from "./internal/entries.js"
export { changes, commandFailure, steps } from "./internal/steps.js"
