/**
 * A real server for each test: @rx/server on 127.0.0.1 (a free port), a SQLite log in a temp
 * folder, the built-in tools in a temp workspace root, and a model scripted per goal. Requests
 * go over real HTTP (node:http, so tests can send any Host header).
 */
import * as Sse from "@effect/experimental/Sse"
import { HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Event, LanguageModel, StateStore } from "@rx/kernel"
import { Server, Toolbox } from "@rx/server"
import type { Config } from "@rx/server"
import { SqliteStore } from "@rx/store-sqlite"
import { Chunk, Context, Deferred, Effect, Either, Layer, Logger, LogLevel, Option, Scope, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export const token = "test-token-0123456789abcdef"

/** A temp folder, removed with the scope. */
export const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )

/** How the model answers: by the goal's first line and the turn (answers given so far). */
export type Answer = (goal: string, turn: number) => Effect.Effect<LanguageModel.Response, LanguageModel.ModelError>

/** A model scripted per goal, so goals running at once each follow their own script. */
export const modelByGoal = (answer: Answer): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.succeed(
    LanguageModel.LanguageModel,
    LanguageModel.LanguageModel.of({
      generate: (request) => {
        const first = request.messages[0]
        const goal = first?.role === "user" ? (first.content.replace(/^Goal:\n/, "").split("\n")[0] ?? "") : ""
        return answer(goal, request.messages.filter((m) => m.role === "assistant").length)
      }
    })
  )

/** list_dir, then done: three iterations' worth of events for any goal. */
export const listThenDone: Answer = (_goal, turn) =>
  Effect.succeed(turn === 0 ? LanguageModel.callTool("list_dir", {}) : LanguageModel.done("listed"))

/** list_dir; once `gate` opens, list_dir again; then done: a run a test holds mid-way. */
export const listTwiceAfter = (gate: Deferred.Deferred<void>): Answer => (_goal, turn) =>
  turn === 0
    ? Effect.succeed(LanguageModel.callTool("list_dir", {}))
    : turn === 1
    ? Effect.as(Deferred.await(gate), LanguageModel.callTool("list_dir", { depth: 2 }))
    : Effect.succeed(LanguageModel.done("twice"))

export interface Running {
  readonly url: string
  readonly root: string
  readonly db: string
}

/** Start a server in the current scope (closed with it), on an existing log `db` or a new one, with the built-in tools or `toolbox`. */
export const startServer = (
  model: Layer.Layer<LanguageModel.LanguageModel>,
  config: Partial<Config.Input> = {},
  files: { readonly root?: string; readonly db?: string; readonly toolbox?: Layer.Layer<Toolbox.Toolbox> } = {}
): Effect.Effect<Running, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const root = files.root ?? (yield* tempDir("rx-server-root-"))
    const db = files.db ?? path.join(yield* tempDir("rx-server-db-"), "rx.db")
    const layer = Server.layer({ token, workspace: root, port: 0, ...config }).pipe(
      Layer.provide(files.toolbox ?? Toolbox.layer({ sandbox: "none" })),
      Layer.provide(model),
      Layer.provide(SqliteStore.layer({ filename: db, synchronous: "NORMAL", pollIntervalMs: 20 })),
      Layer.provide(Logger.minimumLogLevel(process.env["RX_TEST_LOG"] === "1" ? LogLevel.All : LogLevel.Error))
    )
    const context = yield* Layer.build(layer)
    const server = yield* Effect.provide(Server.Server, context)
    return { url: server.url, root, db }
  })

/** The store on a log file, for checks beside the server (its own connection). */
export const withStore = <A, E>(db: string, body: Effect.Effect<A, E, StateStore.StateStore>) =>
  Effect.provide(body, SqliteStore.layer({ filename: db, create: false }))

export interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: unknown
  readonly text: string
}

export interface Call {
  readonly method?: "GET" | "POST"
  readonly body?: unknown
  readonly raw?: string
  /** A body sent chunked, with no Content-Length. */
  readonly chunked?: string
  readonly headers?: Readonly<Record<string, string>>
  /** The bearer token; `null` sends none. */
  readonly token?: string | null
}

const request = (url: string, { body, chunked, headers = {}, method = "GET", raw, token: given = token }: Call) => {
  let req = HttpClientRequest.make(method)(url).pipe(HttpClientRequest.setHeaders(headers))
  if (given !== null) req = HttpClientRequest.bearerToken(req, given)
  if (chunked !== undefined) {
    const bytes = new TextEncoder().encode(chunked)
    // Two chunks, so it is a stream of its own, not one buffer with a length.
    req = HttpClientRequest.bodyStream(req, Stream.make(bytes.slice(0, 10), bytes.slice(10)), { contentType: "application/json" })
  } else if (raw !== undefined) req = HttpClientRequest.bodyText(req, raw, "application/json")
  else if (body !== undefined) req = HttpClientRequest.bodyUnsafeJson(req, body)
  return req
}

/** One request, its whole body read. */
export const call = (running: Running, path: string, options: Call = {}): Effect.Effect<Reply, unknown> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(request(`${running.url}${path}`, options))
    const text = yield* response.text
    const body = Either.getOrElse(Either.try((): unknown => JSON.parse(text)), () => undefined)
    return { status: response.status, headers: response.headers, body, text }
  }).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layer))

/** A streaming request: the response, open until the scope closes. */
export const open = (running: Running, path: string, options: Call = {}): Effect.Effect<HttpClientResponse.HttpClientResponse, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    // The client (its connections) lives as long as the caller's scope, as the response does.
    const client = Context.get(yield* Layer.build(NodeHttpClient.layer), HttpClient.HttpClient)
    return yield* client.execute(request(`${running.url}${path}`, options))
  })

/** The events of a JSON-lines response, decoded. */
export const jsonLines = (response: HttpClientResponse.HttpClientResponse): Stream.Stream<Event.Event, unknown> =>
  response.stream.pipe(
    Stream.decodeText(),
    Stream.splitLines,
    Stream.filter((line) => line !== ""),
    Stream.mapEffect((line) => Either.match(Event.decodeJson(line), { onLeft: (e) => Effect.fail(new Error(e)), onRight: Effect.succeed }))
  )

/** The events of a Server-Sent Events response, with their `id`. */
export const sseEvents = (
  response: HttpClientResponse.HttpClientResponse
): Stream.Stream<{ readonly id: string | undefined; readonly event: Event.Event }, unknown> =>
  Stream.suspend(() => {
    const parsed: Array<Sse.Event> = []
    const parser = Sse.makeParser((event) => {
      if (event._tag === "Event") parsed.push(event)
    })
    return response.stream.pipe(
      Stream.decodeText(),
      Stream.mapConcat((text) => {
        parser.feed(text)
        return parsed.splice(0)
      }),
      Stream.mapEffect((sse) =>
        Either.match(Event.decodeJson(sse.data), {
          onLeft: (e) => Effect.fail(new Error(e)),
          onRight: (event) => Effect.succeed({ id: sse.id, event })
        })
      )
    )
  })

/** Collect a stream into an array. */
export const collect = <A, E>(stream: Stream.Stream<A, E>) => Effect.map(Stream.runCollect(stream), Chunk.toReadonlyArray)

/** Wait until `check` holds of the goal's log (polling the store). */
export const until = (db: string, goalId: string, check: (events: ReadonlyArray<Event.Event>) => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 500; i++) {
      const events = yield* withStore(db, Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId)))
      if (check(events)) return events
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.die(new Error(`timed out waiting for ${what} in goal ${goalId}`))
  })

export const lastTag = (events: ReadonlyArray<Event.Event>) => Option.fromNullable(events[events.length - 1]?._tag)
