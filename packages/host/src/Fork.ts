/**
 * A fork: a new goal whose log starts with another goal's events up to the end of one of its
 * iterations, then goes on live (`rx resume` runs it, with any setting changed). Its first event,
 * `GoalSubmitted`, names the goal and iteration it was forked from (`forkedFrom`); the copied
 * events are the old ones with the new goal's id (and the call ids derived from it), so nothing
 * of those iterations runs again and a replay of the fork reproduces them. The old log is never
 * written to.
 */
import type { FileSystem, Path } from "@effect/platform"
import type { StateStore } from "@rx/kernel"
import { Effect } from "effect"
import type * as Settings from "./Settings.js"

export * from "./internal/fork.js"

/** `rx fork` on a log on this machine: the fork made, with the instructions file of the flags if given; its id and the workspace it will run in. */
export const fromLog = (db: Settings.Database, goalId: string, at: number, given: Settings.Given): Effect.Effect<{ readonly forkId: string; readonly workspace: string | undefined }, Settings.UsageError | StateStore.StoreError, FileSystem.FileSystem | Path.Path> =>
  Effect.flatMap(Effect.promise(() => import("./internal/forks.js")), (m) => m.fromLog(db, goalId, at, given))
