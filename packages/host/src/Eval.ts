/**
 * Recorded goals as tests. `Prompt.build` is a pure function of State, so every request a goal's
 * model received is rebuilt from the log (the events before it, folded), with no live call. `run`
 * asks each of them again of the `LanguageModel` in context (any Layer: scripted, a server, a GGUF
 * file), decodes the answer as the runner does (`Answer.step`, under the goal's behaviour version,
 * repairs included) and compares it with the recorded decision. No tool runs: the recorded results
 * stand in for them in the later requests, so there are no side effects.
 */
import type { StateStore } from "@rx/kernel"
import { Effect } from "effect"
import type { FileSystem, Path } from "@effect/platform"
import type * as Settings from "./Settings.js"

import type { LogReport, LogRequest } from "./internal/eval.js"

export * from "./internal/eval.js"

/**
 * Evaluate goals of the log the settings name against the model they name (see `run`); with the
 * gate of `--min-agreement`, if set. The model adapter and the built-in tools' checks are loaded
 * here only.
 */
export const fromLog = (request: LogRequest): Effect.Effect<LogReport, Settings.UsageError | StateStore.StoreError, FileSystem.FileSystem | Path.Path> =>
  Effect.flatMap(Effect.promise(() => import("./internal/evals.js")), (m) => m.fromLog(request))
