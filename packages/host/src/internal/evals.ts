/**
 * `Eval` over a log on this machine, as `rx eval` asks it: the goals named (else every terminated
 * one), the model of the settings, other instructions from a file. Loaded only by that command.
 */
import { Path } from "@effect/platform"
import { StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Builtins } from "@rx/tools"
import { Effect, Either, Layer, Option } from "effect"
import * as Eval from "./eval.js"
import * as Log from "../Log.js"
import * as Settings from "../Settings.js"
import { UsageError } from "../Settings.js"
import * as Setup from "../Setup.js"

/**
 * The built-in tools' own input checks, as a registry that runs nothing: a candidate's call is
 * refused as a run would refuse it. Tools it does not know (MCP servers') take any input.
 */
const checks = ToolRegistry.ToolRegistry.of({
  specs: Builtins.tools.map((tool) => tool.spec),
  prepare: (call) => {
    const tool = Builtins.tools.find((t) => t.spec.name === call.tool)
    if (tool === undefined) return Either.left(`there is no tool named "${call.tool}"`)
    return Either.map(tool.decode(call.input), (): ToolRegistry.Prepared => ({
      call,
      run: Effect.succeed(Tool.failure("fatal", "rx eval runs no tool")),
      recover: Effect.succeedNone
    }))
  }
})

export const fromLog = (request: Eval.LogRequest) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const { values: v } = yield* Setup.resolve(request.given, Settings.evalKeys)
    const db = yield* Log.database(Settings.dbFlag(request.given))
    const concurrency = Option.getOrElse(request.concurrency, () => 1)
    const model = yield* Setup.modelName(v)
    const instructions = v.instructions === undefined
      ? undefined
      : (yield* Setup.readText(path.resolve(v.instructions), "the --instructions file", Setup.maxInstructionBytes)).trim()
    const logs = yield* Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      const ids = request.goalIds.length > 0 ? request.goalIds : (yield* store.goals({ status: "terminated" })).map((g) => g.goalId)
      return yield* Effect.forEach(ids, (id) => Effect.flatMap(store.load(id), (events) => (events.length === 0 ? Log.noGoal(id, db) : Effect.succeed(events))))
    }).pipe(Effect.provide(Log.layer(db, "read")))
    if (logs.length === 0) {
      return yield* new UsageError({ message: `no terminated goal in the database ${db.label} to evaluate (rx list shows its goals; name open ones to evaluate them as far as they go)` })
    }
    const decisions = logs.reduce((n, events) => n + events.filter((e) => e._tag === "ModelResponded").length, 0)
    if (request.starting !== undefined) yield* request.starting({ goals: logs.length, requests: decisions, model })
    const report = yield* Eval.run(logs, { instructions, concurrency, onStep: request.onStep }).pipe(
      Effect.provide(Layer.merge(Layer.mapError(Setup.modelLayer(v, model), (error) => new UsageError({ message: error.message })), Layer.succeed(ToolRegistry.ToolRegistry, checks))),
      Effect.catchTags({
        "@rx/host/EvalError": (error) => new UsageError({ message: error.message }),
        "@rx/kernel/UnsupportedBehaviour": (error) => new UsageError({ message: error.message })
      })
    )
    return { report, model, minAgreement: v.minAgreement }
  }).pipe(Effect.scoped)
