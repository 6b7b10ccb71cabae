/**
 * @rx/kernel: a small, deterministic agent kernel. A pure reducer over an append-only event
 * log, one runner Effect, and the service Tags it needs (model, tools, store).
 */
export * as Action from "./Action.js"
export * as Answer from "./Answer.js"
export * as Audit from "./Audit.js"
export * as Behaviour from "./Behaviour.js"
export * as Control from "./Control.js"
export * as Event from "./Event.js"
export * as GoalSummary from "./GoalSummary.js"
export * as Issues from "./Issues.js"
export * as JsonAction from "./JsonAction.js"
export * as LanguageModel from "./LanguageModel.js"
export * as Options from "./Options.js"
export * as Prompt from "./Prompt.js"
export * as Replay from "./Replay.js"
export * as Runner from "./Runner.js"
export * as State from "./State.js"
export * as StateStore from "./StateStore.js"
export * as StoreConformance from "./StoreConformance.js"
export * as Termination from "./Termination.js"
export * as Tool from "./Tool.js"
export * as ToolRegistry from "./ToolRegistry.js"
