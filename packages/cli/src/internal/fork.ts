/**
 * `rx fork ID --at N`: a new goal whose log starts with the goal's events up to the end of step
 * N (`Fork` in @rx/host), then `rx resume` of it: it goes on live with any setting changed, and
 * nothing of the first N steps runs again.
 */
import type { FileSystem, Path } from "@effect/platform"
import * as Fork from "@rx/host/Fork"
import * as Goals from "@rx/host/Goals"
import * as Settings from "@rx/host/Settings"
import { Effect, Option } from "effect"
import type * as Usage from "../Usage.js"
import { type ExitStatus, note, runGoal } from "./goal.js"

export const fork = (flags: Usage.Input<typeof Usage.fork>): Effect.Effect<void, unknown, FileSystem.FileSystem | Path.Path | ExitStatus> =>
  Effect.gen(function*() {
    if (Option.isNone(flags.at)) {
      return yield* new Settings.UsageError({ message: "rx fork needs --at N: the last step of the goal the fork keeps (rx inspect shows the steps)" })
    }
    const at = flags.at.value
    const goalId = Option.getOrElse(flags.arg, () => "")
    const goals = yield* Goals.make(flags.settings)
    if (goals.where._tag !== "Log") return yield* new Settings.UsageError({ message: "rx fork works on a log on this machine (--db), not at --server" })
    const { forkId, workspace } = yield* Fork.fromLog(goals.where.db, goalId, at, flags.settings)
    yield* note(
      `goal ${forkId} is a fork of ${goalId} at step ${at}: its first ${at} steps are copied from the log and not run again. It runs in ${workspace ?? "the recorded workspace"}, whose files are as they are now, not as they were at step ${at}`
    )
    yield* runGoal(goals, (hooks) => goals.resume({ goalId: forkId, given: flags.settings, mcpEnv: flags.mcpEnv }, hooks), { json: flags.json, goalId: forkId })
  })
