/**
 * rx serve over HTTP: a real Node server from `Server.layer` on 127.0.0.1 (port 0), the memory
 * store, an instant scripted model and `echo`, driven by `fetch`.
 *
 * - Throughput: `goals` goals submitted at once, each followed (JSON lines) to `Terminated`, with
 *   the server in a child process of its own (`ServeChild.ts`) and the clients here: the wall time
 *   the clients see, the server's CPU time (its `process.cpuUsage`) and the clients' own. The same
 *   goals run in-process by `Runner.run` in as many fibers give the kernel's own cost; the same
 *   HTTP rounds with the server in this process are kept for comparison with earlier figures.
 * - SSE latency: from an event's commit (noted by a wrapper of the server's store) to its parsing
 *   by a client here following with `Accept: text/event-stream`; both sides note the time as
 *   `performance.timeOrigin + performance.now()`.
 */
import * as Sse from "@effect/experimental/Sse"
import { FetchHttpClient, HttpClient, type HttpClientError, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Event, Goal, LanguageModel, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { type Config, Server, Toolbox } from "@rx/server"
import { Context, type Duration, Effect, Either, Layer, Logger, LogLevel, Option, type ParseResult, Queue, Schema, type Scope, Stream } from "effect"
import { spawn } from "node:child_process"
import { join } from "node:path"
import { createInterface } from "node:readline"
import * as TempDir from "./TempDir.js"
import { median } from "./Figures.js"

/** A goal did not end as scripted, or an SSE event was not an event. */
export class BenchError extends Schema.TaggedError<BenchError>()("@rx/bench/BenchError", { message: Schema.String }) {}

const token = "bench-token-0123456789abcdef"
const tools = ToolRegistry.layer([Tool.echo])
const range = (n: number) => Array.from({ length: n }, (_, i) => i)

/**
 * `echo` with a new text each turn, and `done` as a goal's `iterations`-th answer; after `delay`,
 * if given. Turns are counted per goal (its line in the first message), as goals run at once.
 */
export const model = (iterations: number, delay?: Duration.DurationInput): Layer.Layer<LanguageModel.LanguageModel> =>
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

/** The memory store, noting when each event's append succeeded (`now()`), by `goalId:seq`. */
export const timedMemory = (committed: Map<string, number>, now: () => number): Layer.Layer<StateStore.StateStore> =>
  Layer.effect(
    StateStore.StateStore,
    Effect.map(StateStore.makeMemory, (store) =>
      StateStore.StateStore.of({
        ...store,
        append: (goalId, expectedSeq, events, state) =>
          Effect.tap(store.append(goalId, expectedSeq, events, state), () =>
            Effect.sync(() => {
              const at = now()
              for (const event of events) committed.set(`${goalId}:${event.seq}`, at)
            }))
      }))
  )

/**
 * `echo`, noting in `calls` when each call started and ended (`performance.now()`, ms) and for
 * which goal: the step overhead is the time from one call's end to the goal's next call's start.
 */
export const timedEcho = (calls: Array<readonly [string, number, number]>): Layer.Layer<ToolRegistry.ToolRegistry, ToolRegistry.InvalidToolset> =>
  ToolRegistry.layer([{
    ...Tool.echo,
    run: (input, context) =>
      Effect.suspend(() => {
        const start = performance.now()
        return Effect.tap(Tool.echo.run(input, context), () => Effect.sync(() => calls.push([context.goalId ?? context.callId, start, performance.now()])))
      })
  }])

/** A server in the current scope, with `concurrency` goals at once (`echo` unless `toolset` says); its base URL. */
export const serve = <E>(
  concurrency: number,
  llm: Layer.Layer<LanguageModel.LanguageModel>,
  store: Layer.Layer<StateStore.StateStore, E>,
  toolset: Layer.Layer<ToolRegistry.ToolRegistry, ToolRegistry.InvalidToolset> = tools
) =>
  Effect.gen(function*() {
    const root = yield* TempDir.make("rx-bench-serve-")
    const layer = Server.layer({ token, workspace: root, port: 0, concurrency, maxSubscribers: 2 * concurrency + 16 }).pipe(
      Layer.provide(Toolbox.layerWith(() => toolset)),
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

/** Milliseconds since the epoch, comparable between the processes of this machine. */
const now = () => performance.timeOrigin + performance.now()

/** A server in a child process (`ServeChild.ts`). */
interface Child {
  readonly url: string
  /** The child's CPU time so far (µs). */
  readonly cpu: Effect.Effect<number, BenchError>
  /** When each event's append succeeded since the last call (`now()` in the child), by `goalId:seq`. */
  readonly commits: Effect.Effect<ReadonlyMap<string, number>, BenchError>
  /** Each `echo` call since the last call, `[goalId, start, end]` (ms, the child's `performance.now()`); with `steps` only. */
  readonly steps: Effect.Effect<ReadonlyArray<readonly [string, number, number]>, BenchError>
}

const Reply = Schema.parseJson(Schema.Union(
  Schema.Struct({ url: Schema.String }),
  Schema.Struct({ cpu: Schema.Number }),
  Schema.Struct({ commits: Schema.Array(Schema.Tuple(Schema.String, Schema.Number)) }),
  Schema.Struct({ steps: Schema.Array(Schema.Tuple(Schema.String, Schema.Number, Schema.Number)) }),
  Schema.Struct({ error: Schema.String })
))
type Reply = typeof Reply.Type

/**
 * Start the server in a child process for the current scope (closed by ending its stdin, so a
 * `--cpu-prof` profile is written). `profileDir`: run it under `node --cpu-prof` into that folder.
 */
const spawnServer = (
  concurrency: number,
  iterations: number,
  options: {
    readonly delayMs?: number
    readonly profileDir?: string | undefined
    readonly script?: string | undefined
    readonly steps?: StepsStore | undefined
  } = {}
): Effect.Effect<Child, BenchError, Scope.Scope> =>
  Effect.gen(function*() {
    const args = [
      ...(options.profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${options.profileDir}`]),
      options.script ?? join(import.meta.dirname, "ServeChild.js"),
      String(concurrency),
      String(iterations),
      ...(options.delayMs === undefined ? [] : [String(options.delayMs)]),
      ...(options.steps === undefined ? [] : ["--steps", options.steps])
    ]
    const lines = yield* Queue.unbounded<string | null>()
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const child = spawn(process.execPath, args, { stdio: ["pipe", "pipe", "inherit"] })
        const out = createInterface({ input: child.stdout })
        out.on("line", (line) => Queue.unsafeOffer(lines, line))
        out.on("close", () => Queue.unsafeOffer(lines, null))
        return child
      }),
      (child) =>
        Effect.async<void>((resume) => {
          if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
          // A profile takes a moment to write; a child that does not end in a minute is killed.
          const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
          child.once("exit", () => {
            clearTimeout(timer)
            resume(Effect.void)
          })
          child.stdin.end()
        })
    )
    const next: Effect.Effect<Reply, BenchError> = Effect.flatMap(Queue.take(lines), (line) =>
      line === null
        ? Effect.fail(new BenchError({ message: `the bench server (pid ${child.pid}) ended` }))
        : Schema.decodeUnknown(Reply)(line).pipe(
          Effect.mapError(() => new BenchError({ message: `the bench server said: ${line}` }))
        ))
    const ask = (request: string) =>
      Effect.zipRight(Effect.sync(() => child.stdin.write(`${JSON.stringify(request)}\n`)), next)
    const unexpected = (reply: Reply) => new BenchError({ message: `unexpected reply from the bench server: ${JSON.stringify(reply)}` })
    const first = yield* next
    if (!("url" in first)) return yield* unexpected(first)
    return {
      url: first.url,
      cpu: Effect.flatMap(ask("cpu"), (reply) => ("cpu" in reply ? Effect.succeed(reply.cpu) : Effect.fail(unexpected(reply)))),
      commits: Effect.flatMap(ask("commits"), (reply) => ("commits" in reply ? Effect.succeed(new Map(reply.commits)) : Effect.fail(unexpected(reply)))),
      steps: Effect.flatMap(ask("steps"), (reply) => ("steps" in reply ? Effect.succeed(reply.steps) : Effect.fail(unexpected(reply))))
    }
  })

/** Milliseconds from the first submission until every goal's stream ended at `Terminated(done)`; goals are named by `round`. */
const drive = (url: string, round: string, goals: number, iterations: number) =>
  Effect.gen(function*() {
    const http = yield* client
    const started = performance.now()
    yield* Effect.forEach(
      range(goals),
      (i) => Effect.flatMap(submit(http, url, `benchmark goal ${round}-${i}`, iterations), (goalId) => followToEnd(http, url, goalId)),
      { concurrency: "unbounded", discard: true }
    )
    return performance.now() - started
  })

/** One round against the server in the child: the clients' wall time, the server's CPU time and theirs (ms). */
const overHttp = (child: Child, round: string, goals: number, iterations: number) =>
  Effect.gen(function*() {
    const serverBefore = yield* child.cpu
    const clientBefore = process.cpuUsage()
    const ms = yield* drive(child.url, round, goals, iterations)
    const client = process.cpuUsage(clientBefore)
    const server = (yield* child.cpu) - serverBefore
    return { ms, serverCpuMs: server / 1000, clientCpuMs: (client.user + client.system) / 1000 }
  })

/** One round with the server in this process, a fresh one (as measured before the server had a process of its own). */
const overHttpHere = (goals: number, iterations: number) =>
  Effect.gen(function*() {
    const url = yield* serve(goals, model(iterations), StateStore.layerMemory)
    return yield* drive(url, "here", goals, iterations)
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

/** Follow one goal over SSE: when each event was parsed (`now()`), by seq, and when the response came. */
const followSse = (http: HttpClient.HttpClient, url: string, goalId: string) =>
  Effect.gen(function*() {
    const response = yield* http.execute(events(url, goalId).pipe(HttpClientRequest.setHeader("accept", "text/event-stream")))
    const connected = now()
    const parsed: Array<readonly [number, number]> = []
    let last = Option.none<Event.Event>()
    let invalid: string | undefined
    const parser = Sse.makeParser((message) => {
      if (message._tag !== "Event") return
      const decoded = Event.decodeJson(message.data)
      const at = now()
      if (Either.isLeft(decoded)) {
        invalid ??= decoded.left
        return
      }
      last = Option.some(decoded.right)
      parsed.push([decoded.right.seq, at])
    })
    yield* response.stream.pipe(Stream.decodeText(), Stream.runForEach((text) => Effect.sync(() => parser.feed(text))))
    if (invalid !== undefined) return yield* new BenchError({ message: `goal ${goalId}: an SSE event did not decode: ${invalid}` })
    yield* endsDone(goalId, last)
    return { goalId, connected, parsed }
  }).pipe(Effect.scoped)

/** Delays (ms) from commit (in the server's process) to SSE parsing (here) of `goals` goals of `iterations`, the model answering after `delayMs`. */
const sseDelays = (goals: number, iterations: number, delayMs: number) =>
  Effect.gen(function*() {
    const child = yield* spawnServer(goals, iterations, { delayMs })
    const http = yield* client
    const followed = yield* Effect.forEach(
      range(goals),
      (i) => Effect.flatMap(submit(http, child.url, `followed goal ${i}`, iterations), (goalId) => followSse(http, child.url, goalId)),
      { concurrency: "unbounded" }
    )
    const committed = yield* child.commits
    // Events committed once the response came: those before it were read from the log at once.
    return followed.flatMap(({ connected, goalId, parsed }) =>
      parsed.flatMap(([seq, at]) => {
        const commit = committed.get(`${goalId}:${seq}`)
        return commit !== undefined && commit >= connected ? [at - commit] : []
      })
    )
  }).pipe(Effect.scoped)

/** Nearest-rank percentile. */
const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN

/** The log of the step-overhead server: the memory store, or a SQLite file with `synchronous` NORMAL or FULL. */
export const StepsStore = Schema.Literal("memory", "normal", "full")
export type StepsStore = typeof StepsStore.Type

/** Percentiles (ms) of the time from a step's end to the start of its goal's next step, and how many steps gave them. */
export interface StepOverhead {
  readonly p50: number
  readonly p75: number
  readonly p95: number
  readonly p99: number
  readonly steps: number
}

/** From each goal's calls, `[goalId, start, end]`: the gaps between one call's end and the goal's next call's start, sorted. */
const gaps = (calls: ReadonlyArray<readonly [string, number, number]>): ReadonlyArray<number> => {
  const byGoal = new Map<string, Array<readonly [number, number]>>()
  for (const [goalId, start, end] of calls) {
    const list = byGoal.get(goalId) ?? []
    list.push([start, end])
    byGoal.set(goalId, list)
  }
  return [...byGoal.values()].flatMap((list) => {
    const sorted = list.sort((a, b) => a[0] - b[0])
    return sorted.slice(1).map(([start], i) => start - (sorted[i] as readonly [number, number])[1])
  }).sort((a, b) => a - b)
}

/**
 * The served step overhead: `goals` goals at once on a server in its own process over `store`
 * (its `concurrency` as many), each of `iterations` iterations (`echo`, then `done`) and followed
 * to its end as in the throughput rounds; the model answers at once, so from one `echo` call's
 * end to the goal's next one's start is all rx's: recording the result and the iteration's end,
 * the next prompt, the answer's decision and the commit of the call before it runs (two commits a
 * step). One round warms the server up, then `rounds` rounds are measured.
 */
export const stepOverhead = (options: { readonly goals: number; readonly iterations: number; readonly rounds: number; readonly store: StepsStore }): Effect.Effect<StepOverhead, Failure> =>
  Effect.gen(function*() {
    const { goals, iterations } = options
    const child = yield* spawnServer(goals, iterations, { steps: options.store })
    yield* drive(child.url, "warm", goals, iterations)
    yield* child.steps
    const calls: Array<readonly [string, number, number]> = []
    for (let r = 0; r < options.rounds; r++) {
      yield* drive(child.url, `round-${r}`, goals, iterations)
      calls.push(...(yield* child.steps))
    }
    const sorted = gaps(calls)
    const expected = options.rounds * goals * (iterations - 2)
    if (sorted.length !== expected) return yield* new BenchError({ message: `expected ${expected} steps after a first one, got ${sorted.length}` })
    return { p50: percentile(sorted, 0.5), p75: percentile(sorted, 0.75), p95: percentile(sorted, 0.95), p99: percentile(sorted, 0.99), steps: sorted.length }
  }).pipe(
    Effect.scoped,
    Effect.provide(FetchHttpClient.layer),
    Logger.withMinimumLogLevel(LogLevel.Error)
  )

/**
 * The step overhead on each log, one after the other (they share the cores), as `pnpm bench`
 * reports it: by `memory`, `sqlite_normal` and `sqlite_full`, in ms rounded to 0.01.
 */
export const stepOverheads = (onEach: (key: string, figures: StepOverhead) => void = () => {}) =>
  Effect.gen(function*() {
    const logs = [["memory", "memory"], ["sqlite_normal", "normal"], ["sqlite_full", "full"]] as const
    const figures: Record<string, StepOverhead> = {}
    for (const [key, store] of logs) {
      const o = yield* stepOverhead({ goals: 50, iterations: 20, rounds: 3, store })
      const ms = (x: number) => Number(x.toFixed(2))
      figures[key] = { p50: ms(o.p50), p75: ms(o.p75), p95: ms(o.p95), p99: ms(o.p99), steps: o.steps }
      onEach(key, figures[key])
    }
    return figures
  })

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
  /** Wall time per iteration seen by the clients, server in its own process. */
  readonly serverUsPerIteration: number
  /** The server process's CPU time per iteration. */
  readonly serverCpuUsPerIteration: number
  /** The same, round by round (the median of which is `serverCpuUsPerIteration`). */
  readonly serverCpuUsPerIterationByRound: ReadonlyArray<number>
  /** The clients' process's CPU time per iteration. */
  readonly clientCpuUsPerIteration: number
  /** Wall time per iteration with the server in the clients' process. */
  readonly sameProcessUsPerIteration: number
  readonly inProcessUsPerIteration: number
  /** This process's CPU time (all its threads, as the server's) over the same in-process rounds, per iteration. */
  readonly inProcessCpuUsPerIteration: number
  readonly sse: { readonly p50: number; readonly p99: number; readonly events: number }
}

export interface Workload {
  /** Goals at once (and the server's `concurrency`). */
  readonly goals: number
  /** Iterations per goal, the last one `done`. */
  readonly iterations: number
  /** Measured rounds of each kind, alternating; warm-up rounds come first. */
  readonly rounds: number
  /** SSE: goals followed at once, their iterations, and the model's delay per answer; not measured when absent. */
  readonly sse?: { readonly goals: number; readonly iterations: number; readonly delayMs: number } | undefined
  /** Run the server process under `node --cpu-prof`, its profile written to this folder. */
  readonly profileDir?: string | undefined
  /** Also run the rounds with the server in the clients' process (default: yes). */
  readonly sameProcess?: boolean | undefined
  /** The server process's script, to measure another build (default: `ServeChild.js` beside this module). */
  readonly serverScript?: string | undefined
  /** Rounds that warm the server process up before the measured ones (default 2, as measured before this option). */
  readonly warmRounds?: number | undefined
}

/** Medians over `rounds` of in-process, HTTP (server in a child) and HTTP (server here) runs, alternating, so drift hits all; then the SSE delays. */
export const measure = (workload: Workload): Effect.Effect<Figures, Failure> =>
  Effect.gen(function*() {
    const { goals, iterations } = workload
    const sameProcess = workload.sameProcess ?? true
    const child = yield* spawnServer(goals, iterations, { profileDir: workload.profileDir, script: workload.serverScript })
    // Rounds that warm the child's JIT up (the server here warms up with this process's).
    yield* inProcess(goals, iterations)
    for (let r = 0; r < (workload.warmRounds ?? 2); r++) yield* overHttp(child, `warm-${r}`, goals, iterations)
    if (sameProcess) yield* overHttpHere(goals, iterations)
    const separate: Array<{ readonly ms: number; readonly serverCpuMs: number; readonly clientCpuMs: number }> = []
    const here: Array<number> = []
    const local: Array<number> = []
    const localCpu: Array<number> = []
    for (let r = 0; r < workload.rounds; r++) {
      const cpuBefore = process.cpuUsage()
      local.push(yield* inProcess(goals, iterations))
      const cpu = process.cpuUsage(cpuBefore)
      localCpu.push((cpu.user + cpu.system) / 1000)
      separate.push(yield* overHttp(child, `round-${r}`, goals, iterations))
      if (sameProcess) here.push(yield* overHttpHere(goals, iterations))
    }
    const perIteration = (ms: number) => (ms * 1000) / (goals * iterations)
    const sse = workload.sse
    const delays = sse === undefined ? [] : (yield* sseDelays(sse.goals, sse.iterations, sse.delayMs)).sort((a, b) => a - b)
    const wall = median(separate.map((r) => r.ms))
    return {
      goalsPerSecond: goals / (wall / 1000),
      serverUsPerIteration: perIteration(wall),
      serverCpuUsPerIteration: perIteration(median(separate.map((r) => r.serverCpuMs))),
      serverCpuUsPerIterationByRound: separate.map((r) => perIteration(r.serverCpuMs)),
      clientCpuUsPerIteration: perIteration(median(separate.map((r) => r.clientCpuMs))),
      sameProcessUsPerIteration: perIteration(median(here)),
      inProcessUsPerIteration: perIteration(median(local)),
      inProcessCpuUsPerIteration: perIteration(median(localCpu)),
      sse: { p50: percentile(delays, 0.5), p99: percentile(delays, 0.99), events: delays.length }
    }
  }).pipe(
    Effect.scoped,
    Effect.provide(FetchHttpClient.layer),
    // The server logs each goal's end at Info; stdout carries `--json`.
    Logger.withMinimumLogLevel(LogLevel.Error)
  )
