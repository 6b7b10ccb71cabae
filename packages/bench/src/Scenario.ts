/**
 * The benchmark workload: a scripted model that always calls `echo` with a new text, so a run
 * goes on until `maxIterations` (no repeat, no failure), on a memory or SQLite store.
 */
import { Effect, Layer } from "effect"
import { type Goal, LanguageModel, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"
import { median } from "./Figures.js"

export const echo = Tool.echo

export const model = LanguageModel.layerFunction((request, index) =>
  // A summary request (compaction) is answered with a short text.
  request.format === "text" ? LanguageModel.text(`summary ${index}`) : LanguageModel.callTool("echo", { text: `message ${index}` })
)

export const services = Layer.merge(ToolRegistry.layer([echo]), model)

/**
 * Run one goal of `iterations` iterations against `store`. Compaction is off unless asked: the
 * loop's figures stay those of the same work as before summaries existed (see `compaction`).
 */
export const runGoal = (iterations: number, goalId: string, compact = false): Effect.Effect<Goal.Result, Runner.RunError | Goal.GoalNotFound | ToolRegistry.InvalidToolset, StateStore.StateStore> =>
  Runner.run({ goal: "benchmark", goalId, options: { maxIterations: iterations, noProgressWindow: iterations + 1, compact } }).pipe(
    Effect.provide(services)
  )

/** Run on a fresh memory store; returns microseconds per iteration. */
export const memoryRun = (iterations: number, compact = false): Effect.Effect<number, Runner.RunError | Goal.GoalNotFound | ToolRegistry.InvalidToolset> =>
  Effect.gen(function*() {
    const started = performance.now()
    yield* runGoal(iterations, `mem-${iterations}`, compact)
    return ((performance.now() - started) * 1000) / iterations
  }).pipe(Effect.provide(StateStore.layerMemory))

/**
 * Compaction on the memory store: µs per iteration of N = 30 (fewer turns than a prompt keeps, so
 * no summary is asked) with it off and on, and of N = 1,000 off and on (a summary every 16
 * iterations, answered at once), whose difference over the summaries is what one costs the kernel.
 */
export const compaction = (repeats: number) =>
  Effect.gen(function*() {
    const small = { off: [] as Array<number>, on: [] as Array<number> }
    const large = { off: [] as Array<number>, on: [] as Array<number> }
    for (let r = 0; r < repeats; r++) {
      small.off.push(yield* memoryRun(30, false))
      small.on.push(yield* memoryRun(30, true))
      if (r % 3 === 0) {
        large.off.push(yield* memoryRun(1_000, false))
        large.on.push(yield* memoryRun(1_000, true))
      }
    }
    const summaries = yield* Effect.gen(function*() {
      yield* runGoal(1_000, "summaries", true)
      const events = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load("summaries"))
      return events.filter((event) => event._tag === "TurnsSummarised").length
    }).pipe(Effect.provide(StateStore.layerMemory))
    return { small: { off: median(small.off), on: median(small.on) }, large: { off: median(large.off), on: median(large.on) }, summaries }
  })

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
