/**
 * A goal run in this process on a log here: every setting resolved, the model and tool Layers
 * built (nothing is recorded before they are known to work), then the kernel's `Runner`. Loaded
 * only by a command that runs a goal.
 */
import type { FileSystem, Path } from "@effect/platform"
import { Control, type Event, Goal, Options as RunOptions, StateStore, ToolRegistry } from "@rx/kernel"
import { Delegate } from "@rx/tools"
import { Effect } from "effect"
import type { Failure, Hooks, ResumeRequest, RunRequest } from "./service.js"
import * as Log from "../Log.js"
import * as Settings from "../Settings.js"
import { UsageError } from "../Settings.js"
import * as Setup from "../Setup.js"
import * as Postgres from "./postgres.js"

/** The recorded settings a resume compares against, and what it runs with: all but the tools, which are the goal's own. */
const recordedKeys = [
  "workspace",
  "sandbox",
  "baseUrl",
  "model",
  "mode",
  "modelFile",
  "threads",
  "context",
  "seed",
  "temperature",
  "maxOutputTokens",
  "httpAllow"
] as const satisfies ReadonlyArray<keyof Settings.Recorded>

/** `delegate` twice in a run's registry is rx's own mistake, never the user's. */
const orDieInvalidToolset = <A, E, R>(effect: Effect.Effect<A, E | ToolRegistry.InvalidToolset, R>): Effect.Effect<A, Exclude<E, ToolRegistry.InvalidToolset>, R> =>
  Effect.catchIf(effect, (error): error is ToolRegistry.InvalidToolset => error instanceof ToolRegistry.InvalidToolset, Effect.die) as Effect.Effect<A, Exclude<E, ToolRegistry.InvalidToolset>, R>

/** Drive the goal just recorded (`Delegate.drive`). */
const drive = (goalId: string, tools: ToolRegistry.Service, subGoals: Delegate.Config) =>
  Effect.flatMap(Goal.restore(goalId), (state) => Delegate.drive(state, tools, subGoals)).pipe(orDieInvalidToolset)

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

export const run = (db: Settings.Database, request: RunRequest, hooks: Hooks): Effect.Effect<Goal.Result, Failure, FileSystem.FileSystem | Path.Path> =>
  Effect.scoped(Effect.gen(function*() {
    // Everything is checked and built first: a run refused for its settings creates no database and records nothing.
    const { values: v, workspace, mcp, tools, model } = yield* Setup.prepare(db, request.given, Settings.runKeys)
    const servers = yield* Setup.mcpGiven(request, mcp)
    const services = yield* Setup.services(v, model, tools, v.tools !== undefined, servers)
    const mcpNames = services.mcp.names
    // `delegate` (sub-goals), only when --tools names it.
    const delegating = Setup.delegates(v)
    const offered = [...services.offered, ...(delegating ? [Delegate.name] : [])]
    const chosen = yield* Settings.approval(v.ask ?? [], v.deny ?? [], [...Setup.toolNamesKnown, ...mcpNames], [...offered, ...mcpNames])
    // An MCP server's destructive tools ask a person, unless --deny names them.
    const approval = { ...Object.fromEntries(services.mcp.ask.map((name) => [name, "ask" as const])), ...chosen }
    const settings: Settings.Recorded = {
      ...Setup.recordedSettings(v, workspace, model),
      // The tools offered, when not all the built-ins alone: a resume offers the same ones.
      ...(offered.length === Setup.builtinNames.length && !delegating ? {} : { tools: offered }),
      // The MCP servers: a resume starts them again. Their variables' values are never recorded.
      ...(servers.recorded.length === 0 ? {} : { mcp: servers.recorded }),
      // What they listed and were not offered.
      ...(services.mcp.leftOut.length === 0 ? {} : { mcpLeftOut: services.mcp.leftOut })
    }
    const options: RunOptions.Input = { ...Setup.runOptions(v), ...(Object.keys(approval).length === 0 ? {} : { approval }), settings }
    const submit = yield* Setup.submission(db, request, options, Setup.instructions(v, workspace))
    yield* Setup.tell(services.notes)
    // The goal records `delegate`'s spec when it is offered; `drive` runs it.
    return yield* submit(hooks.observe).pipe(
      Effect.provideService(ToolRegistry.ToolRegistry, delegating ? Delegate.offer(services.registry) : services.registry),
      Effect.flatMap((goalId) => drive(goalId, services.registry, Setup.subGoals(tools, hooks))),
      Effect.provide(services.layer),
      Effect.provide(Log.layer(db, "create"))
    )
  }))

export const resume = (db: Settings.Database, request: ResumeRequest, hooks: Hooks): Effect.Effect<Goal.Result, Failure, FileSystem.FileSystem | Path.Path> =>
  Effect.scoped(Effect.gen(function*() {
    const { goalId, given } = request
    const state = yield* Goal.restore(goalId)
    if (state.seq === 0) return yield* Log.noGoal(goalId, db)
    const recorded = state.options.settings ?? {}
    // The tools the goal was offered, as far as they can run here (said at start if not).
    const offered = (recorded.tools ?? Setup.builtinNames).filter((name) => Setup.builtinNames.includes(name))
    const { values: v, workspace, mcp, tools, model } = yield* Setup.prepare(db, given, Settings.resumeKeys, { recorded, tools: offered })
    if (recorded.volume !== undefined) yield* Postgres.onVolume(goalId, recorded.volume, workspace)
    // The limits of a goal are in its options; only a flag changes them.
    const limitFlags = Settings.values(Settings.fromGiven(given))
    const limits = Setup.runOptions(limitFlags)
    const named = Settings.limitKeys.filter((key) => limitFlags[key] !== undefined).map((key) => `--${Settings.table[key].flag}`).join(", ")
    const changes = Object.entries(limits).filter(([key, value]) => state.options[key as keyof RunOptions.Options] !== value)
    // A terminated goal's log is closed (one Terminated, last): no limit reopens it.
    if (state.terminated !== null && named !== "") {
      return yield* new UsageError({
        message: state.terminated.reason === "max_iterations"
          ? `goal ${goalId} ended at its iteration limit (max_iterations, ${plural(state.completed, "iteration")}) and a terminated goal's log is closed, so ${named} cannot extend it: rx run --continue ${goalId} goes on from where it stopped, as a new goal`
          : `goal ${goalId} has terminated (${state.terminated.reason}) and a terminated goal's log is closed, so ${named} cannot change it: start a new goal with rx run`
      })
    }
    if (limits.maxIterations !== undefined && limits.maxIterations <= state.completed) {
      return yield* new UsageError({
        message: `goal ${goalId} has completed ${plural(state.completed, "iteration")} already; --max-iterations must be more than that (rx cancel ${goalId} stops it)`
      })
    }
    // The goal's MCP servers again; their tools as the goal recorded them.
    const servers = yield* Setup.mcpRecorded(recorded, request.mcpEnv, mcp)
    const services = yield* Setup.services(v, model, tools, false, { ...servers, pinned: state.tools })
    const settings = Setup.recordedSettings(v, workspace, model)
    yield* Setup.tell(services.notes)
    // Other settings or limits than recorded: record what this resume uses before it runs, so
    // the log (and rx inspect) says what each resume ran with.
    const differs = recordedKeys.some((key) => JSON.stringify(recorded[key]) !== JSON.stringify(settings[key]))
    const changed = state.terminated === null && (differs || changes.length > 0)
      ? yield* Control.changeOptions(goalId, (current): RunOptions.Input => ({ ...current, ...limits, settings: { ...current.settings, ...settings } }))
      : "unchanged"
    const appended = changed === "changed"
      ? (yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId, state.seq))).filter((e): e is Event.Of<"OptionsChanged"> => e._tag === "OptionsChanged")
      : []
    if (hooks.starting !== undefined) yield* hooks.starting({ state, settings: { ...recorded, ...settings }, before: state.options, changed: appended })
    return yield* Delegate.drive(state, services.registry, Setup.subGoals(tools, hooks)).pipe(Effect.provide(services.layer), orDieInvalidToolset)
  })).pipe(Effect.provide(Log.layer(db, "write")))
