/**
 * The benchmark workload: a scripted model that always calls `echo` with a new text, so a run
 * goes on until `maxIterations` (no repeat, no failure), on a memory or SQLite store.
 */
import { Effect, Layer } from "effect"
import { type Goal, LanguageModel, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"

export const echo = Tool.echo

export const model = LanguageModel.layerFunction((_request, index) =>
  LanguageModel.callTool("echo", { text: `message ${index}` })
)

export const services = Layer.merge(ToolRegistry.layer([echo]), model)

/** Run one goal of `iterations` iterations against `store`. */
export const runGoal = (iterations: number, goalId: string): Effect.Effect<Goal.Result, Runner.RunError | Goal.GoalNotFound | ToolRegistry.InvalidToolset, StateStore.StateStore> =>
  Runner.run({ goal: "benchmark", goalId, options: { maxIterations: iterations, noProgressWindow: iterations + 1 } }).pipe(
    Effect.provide(services)
  )

/** Run on a fresh memory store; returns microseconds per iteration. */
export const memoryRun = (iterations: number): Effect.Effect<number, Runner.RunError | Goal.GoalNotFound | ToolRegistry.InvalidToolset> =>
  Effect.gen(function*() {
    const started = performance.now()
    yield* runGoal(iterations, `mem-${iterations}`)
    return ((performance.now() - started) * 1000) / iterations
  }).pipe(Effect.provide(StateStore.layerMemory))

/** Run on a SQLite file; returns microseconds per iteration. */
export const sqliteRun = (
  filename: string,
  iterations: number,
  synchronous: "FULL" | "NORMAL"
): Effect.Effect<number, Runner.RunError | Goal.GoalNotFound | ToolRegistry.InvalidToolset | SqliteStore.DatabaseRefused> =>
  Effect.gen(function*() {
    const started = performance.now()
    yield* runGoal(iterations, `sql-${iterations}`)
    return ((performance.now() - started) * 1000) / iterations
  }).pipe(Effect.provide(SqliteStore.layer({ filename, synchronous })))

/** A model that calls `echo` `iterations` times, then interrupts the run (the goal stays open). */
export const untilThenStop = (iterations: number) =>
  Layer.sync(LanguageModel.LanguageModel, () => {
    let index = 0
    return {
      generate: () =>
        Effect.suspend(() =>
          index < iterations ? Effect.succeed(LanguageModel.callTool("echo", { text: `message ${index++}` })) : Effect.interrupt
        )
    }
  })

/**
 * `goals` goals of `iterations` iterations each, run at once on one SQLite file (NORMAL), as a
 * server or daemon with many goals runs them: this process's CPU time per iteration, in µs (each
 * goal's cancel watcher follows the log the whole run, beside the other goals' appends).
 */
export const sqliteConcurrent = (
  filename: string,
  goals: number,
  iterations: number
): Effect.Effect<number, Runner.RunError | Goal.GoalNotFound | ToolRegistry.InvalidToolset | SqliteStore.DatabaseRefused> =>
  Effect.gen(function*() {
    const before = process.cpuUsage()
    yield* Effect.forEach(
      Array.from({ length: goals }, (_, i) => i),
      (i) =>
        Runner.run({ goal: `benchmark ${i}`, options: { maxIterations: iterations, noProgressWindow: iterations + 1 } }).pipe(Effect.provide(services)),
      { concurrency: "unbounded", discard: true }
    )
    const used = process.cpuUsage(before)
    return (used.user + used.system) / (goals * iterations)
  }).pipe(Effect.provide(SqliteStore.layer({ filename, synchronous: "NORMAL" })))
