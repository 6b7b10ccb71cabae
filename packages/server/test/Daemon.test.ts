/**
 * The server as a daemon, on a real SQLite file across restarts: a shutdown interrupts the runs
 * and leaves their goals open with `Suspended(shutdown)`, within a few seconds; the next start
 * resumes every open goal that does not wait for a person; a slow follower is disconnected.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Event, LanguageModel, Runner, StateStore, ToolRegistry } from "@rx/kernel"
import { Cause, Deferred, Effect, Either, Exit, Fiber, Layer, Schedule, Scope, Stream } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { Toolbox } from "@rx/server"
import { SqliteStore } from "@rx/store-sqlite"
import { freePort } from "../../llm/test/FakeServer.js"
import { call, collect, jsonLines, modelByGoal, open, startServer, tempDir, until, withStore } from "./helpers.js"

const load = (db: string, goalId: string) => withStore(db, Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId)))
const tags = (events: ReadonlyArray<Event.Event>) => events.map((event) => event._tag)
const submit = (server: { readonly url: string }, goal: string, extra: Record<string, unknown> = {}) =>
  Effect.map(call({ url: server.url, root: "", db: "" }, "/v1/goals", { method: "POST", body: { goal, ...extra } }), (reply) => {
    expect(reply.status).toBe(202)
    return (reply.body as { goalId: string }).goalId
  })

/** The first server's model: the approval goal asks to write; every other goal's model never answers. */
const stuck = modelByGoal((goal) =>
  goal === "needs approval" ? Effect.succeed(LanguageModel.callTool("write_file", { path: "a.txt", content: "a" })) : Effect.never
)
/** The second server's model: every goal ends at once. */
const finishing = modelByGoal(() => Effect.succeed(LanguageModel.done("finished after the restart")))

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
const accepts = (port: number) =>
  Effect.async<void, Error>((resume) => {
    const socket = net.connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.void)
    })
    socket.once("error", (error) => resume(Effect.fail(error)))
  })

describe("daemon", () => {
  it.scopedLive("a request that comes while the server starts (listening, its routes not yet up) is refused at once with 503 starting, not held; then it is answered", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      // The start is held where the server listens but its routes are not attached yet.
      const gate = yield* Deferred.make<void>()
      const held = Layer.effect(
        Toolbox.Toolbox,
        Effect.map(Toolbox.Toolbox, (box) => Toolbox.Toolbox.of({ ...box, serving: (endpoints) => Effect.zipRight(Deferred.await(gate), box.serving(endpoints)) }))
      ).pipe(Layer.provide(Toolbox.layer({ sandbox: "none" })))
      const starting = yield* Effect.fork(startServer(finishing, { port }, { toolbox: held }))
      yield* Effect.retry(accepts(port), Schedule.spaced("20 millis").pipe(Schedule.upTo("60 seconds")))

      const early = { url: `http://127.0.0.1:${port}`, root: "", db: "" }
      for (const [method, route] of [["GET", "/healthz"], ["GET", "/v1/goals"], ["POST", "/v1/goals"]] as const) {
        // Without an answer, Node would hold it for its requestTimeout (a minute).
        const reply = yield* call(early, route, method === "POST" ? { method, body: { goal: "too early" } } : {}).pipe(Effect.timeout("20 seconds"))
        expect(reply.status).toBe(503)
        expect(reply.headers["retry-after"]).toBe("1")
        expect(reply.body).toEqual({ _tag: "@rx/server/Unavailable", reason: "starting", message: "the server is starting; try again in a moment" })
      }
      expect(starting.unsafePoll()).toBeNull()

      yield* Deferred.succeed(gate, undefined)
      const server = yield* Fiber.join(starting)
      expect((yield* call(server, "/healthz")).status).toBe(200)
      expect((yield* call(server, "/v1/goals")).body).toMatchObject({ goals: [] })
    }))

  it.scopedLive("shutdown interrupts the runs (Suspended(shutdown), goals open) within seconds; a restart resumes every open goal but one waiting for a person", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("rx-server-root-")
      const db = path.join(yield* tempDir("rx-server-db-"), "rx.db")

      const first = yield* Scope.make()
      // One goal at a time: the goal waiting for a person gives its place back when it suspends,
      // then the goal that runs until stopped holds it, so the last one is still queued at shutdown.
      const server = yield* Scope.extend(startServer(stuck, { concurrency: 1 }, { root, db }), first)
      const waiting = yield* submit(server, "needs approval", { options: { approval: { write_file: "ask" } } })
      yield* until(db, waiting, (events) => events.some((e) => e._tag === "Suspended"), "the approval request")
      const running = yield* submit(server, "runs until stopped")
      const queued = yield* submit(server, "never started")
      const activity = (goalId: string) => Effect.map(call(server, `/v1/goals/${goalId}`), (reply) => (reply.body as { activity?: unknown }).activity)
      yield* Effect.repeat(activity(running), { until: (now) => now === "running", schedule: Schedule.spaced("20 millis"), times: 500 })
      expect(yield* activity(running)).toBe("running")
      expect(yield* activity(queued)).toBe("queued")
      const follower = yield* Effect.fork(Effect.scoped(Effect.flatMap(open(server, `/v1/goals/${running}/events`), (r) => collect(jsonLines(r)))))

      // The running goal never ends by itself: a shutdown that waited for it would never return.
      yield* Scope.close(first, Exit.void)
      // The follower's stream ended with the server (it did not hang).
      const followed = yield* follower.await
      expect(Exit.isSuccess(followed) || Exit.isFailure(followed)).toBe(true)

      const stopped = yield* load(db, running)
      expect(stopped[stopped.length - 1]).toMatchObject({ _tag: "Suspended", reason: "shutdown" })
      expect(tags(stopped)).not.toContain("Terminated")
      expect(tags(yield* load(db, queued))).toEqual(["GoalSubmitted"])
      const awaiting = yield* load(db, waiting)
      expect(awaiting[awaiting.length - 1]).toMatchObject({ _tag: "Suspended", reason: "awaiting_approval" })

      // The next start, on the same log: both open goals end; the one awaiting a person waits still.
      const again = yield* startServer(finishing, {}, { root, db })
      for (const goalId of [running, queued]) {
        const events = yield* until(db, goalId, (log) => log.some((e) => e._tag === "Terminated"), "its end after the restart")
        expect(events[events.length - 1]).toMatchObject({ _tag: "Terminated", reason: "done", detail: "finished after the restart" })
      }
      const view = yield* call(again, `/v1/goals/${waiting}`)
      expect(view.body).toMatchObject({ status: "waiting", activity: "idle", approval: { tool: "write_file" } })
      expect((yield* load(db, waiting)).length).toBe(awaiting.length)
      // Resuming it by hand is refused while it waits; approving it lets it go on.
      expect((yield* call(again, `/v1/goals/${waiting}/resume`, { method: "POST" })).status).toBe(409)
      expect((yield* call(again, `/v1/goals/${waiting}/approvals/${waiting}:1`, { method: "POST", body: { approve: true } })).status).toBe(202)
      yield* until(db, waiting, (log) => log.some((e) => e._tag === "Terminated"), "its end after the approval")
      expect(fs.readFileSync(path.join(root, "a.txt"), "utf8")).toBe("a")
    }))

  it.scopedLive("a goal whose workspace is outside the root is not run: not at start, not on POST resume (409)", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("rx-server-root-")
      const db = path.join(yield* tempDir("rx-server-db-"), "rx.db")
      fs.mkdirSync(path.join(root, "inner"))
      const first = yield* Scope.make()
      const server = yield* Scope.extend(startServer(modelByGoal(() => Effect.never), {}, { root, db }), first)
      const outside = yield* submit(server, "works at the root")
      const inside = yield* submit(server, "works inside", { workspace: "inner" })
      yield* Scope.close(first, Exit.void)

      // Now the root is the inner folder: the first goal's workspace is outside it.
      const again = yield* startServer(finishing, {}, { root: path.join(root, "inner"), db })
      yield* until(db, inside, (log) => log.some((e) => e._tag === "Terminated"), "its end")
      const resumed = yield* call(again, `/v1/goals/${outside}/resume`, { method: "POST" })
      expect(resumed.status).toBe(409)
      expect(resumed.body).toMatchObject({ _tag: "@rx/server/Conflict", goalId: outside })
      expect(tags(yield* load(db, outside))).not.toContain("Terminated")
    }))

  it.scopedLive("a goal whose workspace folder was replaced by a link leaving the root is not run: not at start, not on POST resume (409)", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("rx-server-root-")
      const outsideRoot = yield* tempDir("rx-server-elsewhere-")
      const db = path.join(yield* tempDir("rx-server-db-"), "rx.db")
      fs.mkdirSync(path.join(root, "project"))
      fs.mkdirSync(path.join(root, "kept"))
      const first = yield* Scope.make()
      const server = yield* Scope.extend(startServer(modelByGoal(() => Effect.never), {}, { root, db }), first)
      const swapped = yield* submit(server, "works in project", { workspace: "project" })
      const kept = yield* submit(server, "works in kept", { workspace: "kept" })
      yield* Scope.close(first, Exit.void)

      // The recorded folder is now a link to a folder outside the root.
      fs.rmdirSync(path.join(root, "project"))
      fs.symlinkSync(outsideRoot, path.join(root, "project"))
      const again = yield* startServer(finishing, {}, { root, db })
      yield* until(db, kept, (log) => log.some((e) => e._tag === "Terminated"), "its end")
      const resumed = yield* call(again, `/v1/goals/${swapped}/resume`, { method: "POST" })
      expect(resumed.status).toBe(409)
      expect(resumed.body).toMatchObject({ _tag: "@rx/server/Conflict", goalId: swapped })
      expect(tags(yield* load(db, swapped))).not.toContain("Terminated")
    }))

  it.scopedLive("a goal's lease keeps a second server on the same log off it", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("rx-server-root-")
      const db = path.join(yield* tempDir("rx-server-db-"), "rx.db")
      const asked = yield* Deferred.make<void>()
      const first = yield* startServer(modelByGoal(() => Effect.zipRight(Deferred.succeed(asked, undefined), Effect.never)), {}, { root, db })
      const goalId = yield* submit(first, "held by the first server")
      yield* Deferred.await(asked)
      const second = yield* startServer(finishing, {}, { root, db })
      yield* Effect.sleep("300 millis")
      expect((yield* call(second, `/v1/goals/${goalId}`)).body).toMatchObject({ status: "open", activity: "idle" })
      const resumed = yield* call(second, `/v1/goals/${goalId}/resume`, { method: "POST" })
      expect(resumed.status).toBe(409)
      expect(resumed.body).toMatchObject({ _tag: "@rx/server/Conflict", goalId })
      expect(tags(yield* load(db, goalId))).toEqual(["GoalSubmitted"])
      // A cancel through the second server reaches the runner in the first.
      expect((yield* call(second, `/v1/goals/${goalId}/cancel`, { method: "POST" })).status).toBe(202)
      const events = yield* until(db, goalId, (log) => log.some((e) => e._tag === "Terminated"), "its end")
      expect(events[events.length - 1]).toMatchObject({ reason: "cancelled" })
      expect((yield* call(first, `/v1/goals/${goalId}`)).body).toMatchObject({ status: "terminated", reason: "cancelled" })
    }))

  it.scopedLive("POST /v1/goals/{id}/resume continues a goal suspended by a shutdown", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("rx-server-root-")
      const db = path.join(yield* tempDir("rx-server-db-"), "rx.db")
      const asked = yield* Deferred.make<void>()
      const first = yield* Scope.make()
      const server = yield* Scope.extend(startServer(modelByGoal(() => Effect.zipRight(Deferred.succeed(asked, undefined), Effect.never)), {}, { root, db }), first)
      const goalId = yield* submit(server, "stopped once")
      yield* Deferred.await(asked)
      yield* Scope.close(first, Exit.void)
      const again = yield* startServer(finishing, { resumeOnStart: false }, { root, db })
      expect((yield* call(again, `/v1/goals/${goalId}`)).body).toMatchObject({ status: "open", activity: "idle", suspended: { reason: "shutdown" } })
      const resumed = yield* call(again, `/v1/goals/${goalId}/resume`, { method: "POST" })
      expect(resumed.status).toBe(202)
      const events = yield* until(db, goalId, (log) => log.some((e) => e._tag === "Terminated"), "its end")
      expect(events[events.length - 1]).toMatchObject({ reason: "done" })
    }))

  it.scopedLive("a follower that reads nothing while its buffer is full is disconnected, and its place freed", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("rx-server-root-")
      const db = path.join(yield* tempDir("rx-server-db-"), "rx.db")
      // A goal with a long log (about 24 MB), written to the file directly.
      const goalId = yield* Effect.gen(function*() {
        const id = yield* Runner.submit({ goal: "a long log", options: { settings: { workspace: root } } }).pipe(
          Effect.provide(ToolRegistry.layer([]))
        )
        const store = yield* StateStore.StateStore
        const filler: ReadonlyArray<Event.Event> = Array.from({ length: 3_000 }, (_, i) => ({
          _tag: "ModelFailed",
          goalId: id,
          seq: i + 1,
          iteration: 1,
          at: 0,
          message: `${i} ${"x".repeat(8_000)}`
        }))
        yield* store.append(id, 1, filler)
        return id
      }).pipe(Effect.provide(SqliteStore.layer({ filename: db })))
      const server = yield* startServer(modelByGoal(() => Effect.never), {
        resumeOnStart: false,
        maxSubscribers: 1,
        subscriberBuffer: 8,
        subscriberStallMs: 300
      }, { root, db })
      const slow = yield* open(server, `/v1/goals/${goalId}/events`)
      // Read nothing: the socket fills, then the buffer; after subscriberStallMs the server lets go.
      // Its place is then free again (while it still has read nothing): a new follower is accepted
      // (until then it is refused with a 503) and gets the log from where it asks.
      const next = yield* Effect.scoped(Effect.flatMap(open(server, `/v1/goals/${goalId}/events?from=2990`), (r) =>
        r.status === 200 ? collect(jsonLines(r).pipe(Stream.take(5))) : Effect.fail(new Error(`refused: ${r.status}`)))).pipe(
          Effect.retry({ schedule: Schedule.spaced("100 millis"), times: 1_200 })
        )
      expect(next.map((e) => e.seq)).toEqual([2_991, 2_992, 2_993, 2_994, 2_995])
      // The slow one's stream ends (cut short, or reset), where a follower kept waiting would time out.
      const got = yield* Effect.either(collect(jsonLines(slow)).pipe(Effect.timeout("10 seconds")))
      Either.match(got, {
        onLeft: (error) => expect(error).not.toBeInstanceOf(Cause.TimeoutException),
        onRight: (events) => expect(events.length).toBeLessThan(3_001)
      })
    }))
})
