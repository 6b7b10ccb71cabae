/**
 * rx serve over HTTP: a real Node server from `Server.layer` on 127.0.0.1 (port 0), the memory
 * store, an instant scripted model and `echo`, driven by `fetch` in the same process.
 *
 * - Throughput: `goals` goals submitted at once, each followed (JSON lines) to `Terminated`; the
 *   same goals run in-process by `Runner.run` in as many fibers give the kernel's own cost, so
 *   the difference is the server's (and its client's) cost per iteration.
 * - SSE latency: from an event's commit (noted by a wrapper of the store) to its parsing by a
 *   client following with `Accept: text/event-stream`; one process, so one `performance.now()`.
 */
import * as Sse from "@effect/experimental/Sse"
import { FetchHttpClient, HttpClient, type HttpClientError, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Event, Goal, LanguageModel, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { type Config, Server, Toolbox } from "@rx/server"
import { Context, type Duration, Effect, Either, Layer, Logger, LogLevel, Option, type ParseResult, Schema, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** A goal did not end as scripted, or an SSE event was not an event. */
export class BenchError extends Schema.TaggedError<BenchError>()("@rx/bench/BenchError", { message: Schema.String }) {}

const token = "bench-token-0123456789abcdef"
const tools = ToolRegistry.layer([Tool.echo])
const range = (n: number) => Array.from({ length: n }, (_, i) => i)

/**
 * `echo` with a new text each turn, and `done` as a goal's `iterations`-th answer; after `delay`,
 * if given. Turns are counted per goal (its line in the first message), as goals run at once.
 */
const model = (iterations: number, delay?: Duration.DurationInput): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.sync(LanguageModel.LanguageModel, () => {
    const turns = new Map<string, number>()
    const answer = (request: LanguageModel.Request) =>
      Effect.sync(() => {
        // The goal's line: the first message later notes the turns it no longer shows.
        const goal = request.messages[0]?.content.split("\n", 2)[1] ?? ""
        const turn = turns.get(goal) ?? 0
        turns.set(goal, turn + 1)
        return turn < iterations - 1 ? LanguageModel.callTool("echo", { text: `message ${turn}` }) : LanguageModel.done("echoed")
      })
    return LanguageModel.LanguageModel.of({ generate: delay === undefined ? answer : (request) => Effect.delay(answer(request), delay) })
  })

/** The memory store, noting when each event's append succeeded, by `goalId:seq`. */
const timedMemory = (committed: Map<string, number>): Layer.Layer<StateStore.StateStore> =>
  Layer.effect(
    StateStore.StateStore,
    Effect.map(StateStore.makeMemory, (store) =>
      StateStore.StateStore.of({
        ...store,
        append: (goalId, expectedSeq, events, state) =>
          Effect.tap(store.append(goalId, expectedSeq, events, state), () =>
            Effect.sync(() => {
              const at = performance.now()
              for (const event of events) committed.set(`${goalId}:${event.seq}`, at)
            }))
      }))
  )

/** A server in the current scope, with `concurrency` goals at once; its base URL. */
const serve = (
  concurrency: number,
  llm: Layer.Layer<LanguageModel.LanguageModel>,
  store: Layer.Layer<StateStore.StateStore>
) =>
  Effect.gen(function*() {
    const root = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "rx-bench-serve-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const layer = Server.layer({ token, workspace: root, port: 0, concurrency, maxSubscribers: 2 * concurrency + 16 }).pipe(
      Layer.provide(Toolbox.layerWith(() => tools)),
      Layer.provide(llm),
      Layer.provide(store)
    )
    return Context.get(yield* Layer.build(layer), Server.Server).url
  })

const SubmitReply = Schema.Struct({ goalId: Schema.String })

/** `POST /v1/goals`: the new goal's id. */
const submit = (client: HttpClient.HttpClient, url: string, goal: string, iterations: number) =>
  HttpClientRequest.post(`${url}/v1/goals`).pipe(
    HttpClientRequest.bearerToken(token),
    HttpClientRequest.bodyUnsafeJson({ goal, options: { maxIterations: iterations } }),
    client.execute,
    Effect.flatMap(HttpClientResponse.schemaBodyJson(SubmitReply)),
    Effect.map((reply) => reply.goalId),
    Effect.scoped
  )

const events = (url: string, goalId: string) =>
  HttpClientRequest.get(`${url}/v1/goals/${goalId}/events`).pipe(HttpClientRequest.bearerToken(token))

/** The event ends the goal as scripted (`done`); anything else fails the benchmark. */
const endsDone = (goalId: string, event: Option.Option<Event.Event>): Effect.Effect<void, BenchError> =>
  Option.isSome(event) && event.value._tag === "Terminated" && event.value.reason === "done"
    ? Effect.void
    : Effect.fail(new BenchError({ message: `goal ${goalId} did not end with Terminated(done)` }))

/** Follow a goal's events (JSON lines) until the response ends, after `Terminated`. */
const followToEnd = (client: HttpClient.HttpClient, url: string, goalId: string) =>
  client.execute(events(url, goalId)).pipe(
    Effect.flatMap((response) =>
      response.stream.pipe(Stream.decodeText(), Stream.splitLines, Stream.filter((line) => line !== ""), Stream.runLast)
    ),
    Effect.flatMap((last) => endsDone(goalId, Option.flatMap(last, (line) => Either.getRight(Event.decodeJson(line))))),
    Effect.scoped
  )

const client = Effect.map(HttpClient.HttpClient, HttpClient.filterStatusOk)

/** Milliseconds from the first submission until every goal's stream ended at `Terminated(done)`. */
const overHttp = (goals: number, iterations: number) =>
  Effect.gen(function*() {
    const url = yield* serve(goals, model(iterations), StateStore.layerMemory)
    const http = yield* client
    const started = performance.now()
    yield* Effect.forEach(
      range(goals),
      (i) => Effect.flatMap(submit(http, url, `benchmark goal ${i}`, iterations), (goalId) => followToEnd(http, url, goalId)),
      { concurrency: "unbounded", discard: true }
    )
    return performance.now() - started
  }).pipe(Effect.scoped)

/** Milliseconds for the same goals run by `Runner.run` in as many fibers, on a fresh memory store. */
const inProcess = (goals: number, iterations: number) =>
  Effect.gen(function*() {
    const started = performance.now()
    yield* Effect.forEach(
      range(goals),
      (i) =>
        Effect.flatMap(
          Runner.run({ goal: `benchmark goal ${i}`, options: { maxIterations: iterations } }),
          (result) => (result.reason === "done" ? Effect.void : Effect.fail(new BenchError({ message: `goal ${result.goalId} ended ${result.reason}` })))
        ),
      { concurrency: "unbounded", discard: true }
    )
    return performance.now() - started
  }).pipe(Effect.provide(Layer.mergeAll(tools, model(iterations), StateStore.layerMemory)))

/** Follow one goal over SSE; each event's delay from its commit, for events committed once the response came. */
const followSse = (http: HttpClient.HttpClient, url: string, goalId: string, committed: ReadonlyMap<string, number>) =>
  Effect.gen(function*() {
    const response = yield* http.execute(events(url, goalId).pipe(HttpClientRequest.setHeader("accept", "text/event-stream")))
    const connected = performance.now()
    const delays: Array<number> = []
    let last = Option.none<Event.Event>()
    let invalid: string | undefined
    const parser = Sse.makeParser((message) => {
      if (message._tag !== "Event") return
      const decoded = Event.decodeJson(message.data)
      const at = performance.now()
      if (Either.isLeft(decoded)) {
        invalid ??= decoded.left
        return
      }
      last = Option.some(decoded.right)
      const commit = committed.get(`${goalId}:${decoded.right.seq}`)
      if (commit !== undefined && commit >= connected) delays.push(at - commit)
    })
    yield* response.stream.pipe(Stream.decodeText(), Stream.runForEach((text) => Effect.sync(() => parser.feed(text))))
    if (invalid !== undefined) return yield* new BenchError({ message: `goal ${goalId}: an SSE event did not decode: ${invalid}` })
    yield* endsDone(goalId, last)
    return delays
  }).pipe(Effect.scoped)

/** Delays (ms) from commit to SSE parsing of `goals` goals of `iterations`, the model answering after `delay`. */
const sseDelays = (goals: number, iterations: number, delay: Duration.DurationInput) =>
  Effect.gen(function*() {
    const committed = new Map<string, number>()
    const url = yield* serve(goals, model(iterations, delay), timedMemory(committed))
    const http = yield* client
    const all = yield* Effect.forEach(
      range(goals),
      (i) => Effect.flatMap(submit(http, url, `followed goal ${i}`, iterations), (goalId) => followSse(http, url, goalId, committed)),
      { concurrency: "unbounded" }
    )
    return all.flat()
  }).pipe(Effect.scoped)

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN
/** Nearest-rank percentile. */
const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN

/** Why a measurement failed: the server would not start, a request or a goal failed. */
export type Failure =
  | BenchError
  | Config.InvalidConfig
  | Server.ListenError
  | HttpClientError.HttpClientError
  | ParseResult.ParseError
  | Runner.RunError
  | Goal.GoalNotFound
  | ToolRegistry.InvalidToolset

export interface Figures {
  readonly goalsPerSecond: number
  readonly serverUsPerIteration: number
  readonly inProcessUsPerIteration: number
  readonly sse: { readonly p50: number; readonly p99: number; readonly events: number }
}

export interface Workload {
  /** Goals at once (and the server's `concurrency`). */
  readonly goals: number
  /** Iterations per goal, the last one `done`. */
  readonly iterations: number
  /** Measured rounds of each kind, alternating; one more of each warms up. */
  readonly rounds: number
  /** SSE: goals followed at once, their iterations, and the model's delay per answer. */
  readonly sse: { readonly goals: number; readonly iterations: number; readonly delay: Duration.DurationInput }
}

/** Medians over `rounds` of HTTP and in-process runs (alternating, so drift hits both), then the SSE delays. */
export const measure = (workload: Workload): Effect.Effect<Figures, Failure> =>
  Effect.gen(function*() {
    const { goals, iterations } = workload
    yield* inProcess(goals, iterations)
    yield* overHttp(goals, iterations)
    const http: Array<number> = []
    const local: Array<number> = []
    for (let r = 0; r < workload.rounds; r++) {
      local.push(yield* inProcess(goals, iterations))
      http.push(yield* overHttp(goals, iterations))
    }
    const perIteration = (ms: number) => (ms * 1000) / (goals * iterations)
    const delays = (yield* sseDelays(workload.sse.goals, workload.sse.iterations, workload.sse.delay)).sort((a, b) => a - b)
    return {
      goalsPerSecond: goals / (median(http) / 1000),
      serverUsPerIteration: perIteration(median(http)),
      inProcessUsPerIteration: perIteration(median(local)),
      sse: { p50: percentile(delays, 0.5), p99: percentile(delays, 0.99), events: delays.length }
    }
  }).pipe(
    Effect.provide(FetchHttpClient.layer),
    // The server logs each goal's end at Info; stdout carries `--json`.
    Logger.withMinimumLogLevel(LogLevel.Error)
  )
