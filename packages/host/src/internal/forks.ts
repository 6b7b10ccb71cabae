/** `Fork` on a log on this machine, as `rx fork` asks it; loaded by that command only. */
import { Path } from "@effect/platform"
import { StateStore } from "@rx/kernel"
import { Effect } from "effect"
import { make } from "./fork.js"
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
      const id = yield* make(goalId, at, { instructions }).pipe(
        Effect.catchTag("@rx/host/ForkError", (error) => (error.message.startsWith("no goal") ? Log.noGoal(goalId, db) : new UsageError({ message: error.message })))
      )
      const first = yield* Effect.flatMap(StateStore.StateStore, (store) => StateStore.first(store, id, 0, ["GoalSubmitted"]))
      const recorded = first._tag === "GoalSubmitted" ? first.options.settings?.workspace : undefined
      return { forkId: id, workspace: v.workspace === undefined ? recorded : path.resolve(v.workspace) }
    }).pipe(Effect.provide(Log.layer(db, "write")))
  })
