/** `Fork` on a log on this machine, as `rx fork` asks it; loaded by that command only. */
import { Path } from "@effect/platform"
import { State, StateStore } from "@rx/kernel"
import { Effect } from "effect"
import { makeOf } from "./fork.js"
import * as Log from "../Log.js"
import * as Settings from "../Settings.js"
import { UsageError } from "../Settings.js"
import * as Setup from "../Setup.js"

/** `rx fork` on a log on this machine: the fork made, with the instructions file of the flags if given; its id and the workspace it will run in. */
export const fromLog = (db: Settings.Database, goalId: string, at: number, given: Settings.Given) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const v = Settings.values(Settings.fromGiven(given))
    const instructions = v.instructions === undefined
      ? undefined
      : (yield* Setup.readText(path.resolve(v.instructions), "the --instructions file", Setup.maxInstructionBytes)).trim()
    return yield* Effect.gen(function*() {
      const origin = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))
      // What the fork's resume would refuse is refused before the fork is recorded: the settings
      // recorded up to the step it forks at, with the flags (a step that is not there is said by `makeOf`).
      const end = origin.findIndex((e) => e._tag === "IterationCompleted" && e.iteration === at)
      const recorded = end > 0 ? State.fromEvents(goalId, origin.slice(0, end + 1)).options.settings ?? {} : {}
      if (end > 0) {
        yield* Setup.prepare(db, given, Settings.resumeKeys, { recorded })
        if (v.maxIterations !== undefined && v.maxIterations <= at) {
          return yield* new UsageError({ message: `a fork at step ${at} starts with ${at} completed steps: --max-iterations must be more than ${at}` })
        }
      }
      const id = yield* makeOf(goalId, origin, at, { instructions }).pipe(
        Effect.catchTag("@rx/host/ForkError", (error) => (error.message.startsWith("no goal") ? Log.noGoal(goalId, db) : new UsageError({ message: error.message })))
      )
      return { forkId: id, workspace: v.workspace === undefined ? recorded.workspace : path.resolve(v.workspace) }
    }).pipe(Effect.provide(Log.layer(db, "write")))
  })
