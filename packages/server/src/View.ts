/**
 * The one view of a goal: what `rx inspect` prints, what `rx inspect --json` and
 * `GET /v1/goals/{id}/view` encode, and whose steps the web inspector draws. A step is an
 * iteration's entries in the log's order; a call is one entry from its start to its outcome.
 * `steps` is a pure function of the events, so the browser runs it on the events it follows;
 * `goal` adds what the log says of the goal and what its store says of its tree.
 */
export * from "./internal/entries.js"
export { decision, fromStore, goal, oneLine, termination, type Tree } from "./internal/goal.js"
export { changes, commandFailure, steps } from "./internal/steps.js"
