/**
 * The typed client against a real server: every route through `Client`, the error bodies as
 * their classes, a server that cannot be reached, and a follower whose server goes away.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { LanguageModel, Replay } from "@rx/kernel"
import { Client } from "@rx/server"
import { Chunk, Deferred, Effect, Exit, Fiber, Layer, Scope, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { listThenDone, modelByGoal, type Running, startServer, tempDir, token, until } from "./helpers.js"

const clientOf = (server: Running, given = token) => Effect.provide(Client.make({ url: server.url, token: given }), NodeHttpClient.layer)
const all = <A, E>(stream: Stream.Stream<A, E>) => Effect.map(Stream.runCollect(stream), Chunk.toReadonlyArray)

describe("Client", () => {
  it.scopedLive("submits, follows to Terminated, reads a goal and pages through the list", () =>
    Effect.gen(function*() {
      const server = yield* startServer(modelByGoal(listThenDone), { concurrency: 2 })
      const rx = yield* clientOf(server)
      const ids: Array<string> = []
      for (let i = 0; i < 5; i++) ids.push((yield* rx.submit({ goal: `list ${i}` })).goalId)
      const events = yield* all(rx.events(ids[0] ?? ""))
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
      expect(events[events.length - 1]).toMatchObject({ _tag: "Terminated", reason: "done" })
      for (const id of ids) yield* Stream.runDrain(rx.events(id))
      expect(yield* rx.goal(ids[4] ?? "")).toMatchObject({ goalId: ids[4], status: "terminated", reason: "done", detail: "listed" })
      // Two to a page: the stream follows the cursors over three pages, newest first, each goal once.
      const page = yield* rx.list({ limit: 2 })
      expect(page.goals).toHaveLength(2)
      expect(page.cursor).not.toBeNull()
      const listed = yield* all(rx.goals({ status: "terminated" }))
      expect(listed.map((g) => g.goalId).sort()).toEqual([...ids].sort())
      // After a seq, and not following: the rest as far as recorded.
      const tail = yield* all(rx.events(ids[0] ?? "", { after: 2, follow: false }))
      expect(tail.map((e) => e.seq)).toEqual(events.slice(3).map((e) => e.seq))
    }))

  it.scopedLive("approvals, cancel and resume; the API's errors come back as their classes", () =>
    Effect.gen(function*() {
      const server = yield* startServer(modelByGoal((goal, turn) =>
        goal === "wait"
          ? Effect.never
          : Effect.succeed(turn === 0 ? LanguageModel.callTool("write_file", { path: "n.txt", content: "yes" }) : LanguageModel.done("written"))
      ))
      const rx = yield* clientOf(server)
      const { goalId } = yield* rx.submit({ goal: "write", options: { approval: { write_file: "ask" } } })
      yield* until(server.db, goalId, (events) => events.some((e) => e._tag === "Suspended"), "the approval request")
      expect(yield* rx.goal(goalId)).toMatchObject({ status: "waiting", approval: { callId: `${goalId}:1`, tool: "write_file" } })
      expect(yield* Effect.flip(rx.resume(goalId))).toMatchObject({ _tag: "@rx/server/Conflict", goalId })
      expect(yield* Effect.flip(rx.decide(goalId, `${goalId}:9`, { approve: true }))).toMatchObject({ _tag: "@rx/server/Conflict" })
      yield* rx.decide(goalId, `${goalId}:1`, { approve: true })
      const events = yield* all(rx.events(goalId))
      expect(events[events.length - 1]).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(fs.readFileSync(path.join(server.root, "n.txt"), "utf8")).toBe("yes")

      const waiting = (yield* rx.submit({ goal: "wait" })).goalId
      yield* rx.cancel(waiting)
      const cancelled = yield* all(rx.events(waiting))
      expect(cancelled[cancelled.length - 1]).toMatchObject({ _tag: "Terminated", reason: "cancelled" })
      expect(yield* Effect.flip(rx.cancel(waiting))).toMatchObject({ _tag: "@rx/server/Conflict" })

      expect(yield* Effect.flip(rx.goal("nope"))).toMatchObject({ _tag: "@rx/server/NotFound", goalId: "nope" })
      expect(yield* Effect.flip(Stream.runDrain(rx.events("nope")))).toMatchObject({ _tag: "@rx/server/NotFound" })
      expect(yield* Effect.flip(rx.submit({ goal: "" }))).toMatchObject({ _tag: "@rx/server/BadRequest", field: "goal" })
      expect(yield* Effect.flip(rx.submit({ goal: "x", workspace: "../out" }))).toMatchObject({ _tag: "@rx/server/BadRequest", field: "workspace" })
      // Checked before it is sent: the field is named as the server names it.
      expect(yield* Effect.flip(rx.submit({ goal: "x", options: { maxIterations: 0 } }))).toMatchObject({ _tag: "@rx/server/BadRequest", field: "options.maxIterations" })
      const stranger = yield* clientOf(server, "not-the-token-0123456789")
      expect(yield* Effect.flip(stranger.goal(goalId))).toMatchObject({ _tag: "@rx/server/Unauthorized" })
      expect(yield* Effect.flip(Stream.runDrain(stranger.events(goalId)))).toMatchObject({ _tag: "@rx/server/Unauthorized" })
    }))

  it.scopedLive("a message to a running goal reaches its next request once, a retry with the same Idempotency-Key included; an ended goal refuses one", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const requests: Array<LanguageModel.Request> = []
      const model = Layer.succeed(LanguageModel.LanguageModel, {
        generate: (request) =>
          Effect.suspend(() => {
            requests.push(request)
            const turn = request.messages.filter((m) => m.role === "assistant").length
            return turn === 0
              ? Effect.succeed(LanguageModel.callTool("list_dir", {}))
              : turn === 1
              ? Effect.as(Deferred.await(gate), LanguageModel.callTool("list_dir", { depth: 2 }))
              : Effect.succeed(LanguageModel.done("twice"))
          })
      })
      const server = yield* startServer(model)
      const rx = yield* clientOf(server)
      const { goalId } = yield* rx.submit({ goal: "hold" })
      yield* until(server.db, goalId, (events) => events.filter((e) => e._tag === "ModelResponded").length === 1 && events.some((e) => e._tag === "IterationCompleted"), "the first step")
      // Sent twice with one key (a retried request): recorded once, by whom the server says.
      yield* rx.say(goalId, { text: "use the blue folder", by: "ann" }, { idempotencyKey: "m-1" })
      yield* rx.say(goalId, { text: "use the blue folder", by: "ann" }, { idempotencyKey: "m-1" })
      yield* Deferred.succeed(gate, undefined)
      const events = yield* all(rx.events(goalId))
      expect(events[events.length - 1]).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(events.filter((e) => e._tag === "MessageSent")).toMatchObject([{ text: "use the blue folder", by: expect.stringContaining("ann (via ") }])
      expect(requests.map((r) => r.messages.filter((m) => m.content.includes("blue folder")).length)).toEqual([0, 0, 1])
      const refused = yield* Effect.flip(rx.say(goalId, { text: "more" }))
      expect(refused).toMatchObject({ _tag: "@rx/server/Conflict", goalId })
      expect(refused.message).toContain(`rx run --continue ${goalId}`)
    }))

  it.scopedLive("a chain of three continued goals over HTTP: each names the one it continues; a goal that has not ended is refused; each replays", () =>
    Effect.gen(function*() {
      const server = yield* startServer(modelByGoal((goal, turn) =>
        goal === "wait" ? Effect.never : Effect.succeed(turn === 0 ? LanguageModel.callTool("list_dir", {}) : LanguageModel.callTool("list_dir", { depth: turn }))
      ))
      const rx = yield* clientOf(server)
      const ended = (goalId: string) => Effect.map(all(rx.events(goalId)), (events) => events)
      const a = (yield* rx.submit({ goal: "list", options: { maxIterations: 1 } })).goalId
      expect((yield* ended(a)).at(-1)).toMatchObject({ _tag: "Terminated", reason: "max_iterations" })
      const b = (yield* rx.submit({ goal: "go deeper", continues: a, options: { maxIterations: 1 } })).goalId
      const eventsB = yield* ended(b)
      const c = (yield* rx.submit({ goal: "deeper still", continues: b, options: { maxIterations: 1 } }, { idempotencyKey: "c-1" })).goalId
      expect((yield* rx.submit({ goal: "deeper still", continues: b, options: { maxIterations: 1 } }, { idempotencyKey: "c-1" })).goalId).toBe(c)
      const eventsC = yield* ended(c)
      expect(eventsB[0]).toMatchObject({ _tag: "GoalSubmitted", goal: "list", continues: { goalId: a, reason: "max_iterations", text: "go deeper" } })
      expect(eventsC[0]).toMatchObject({ _tag: "GoalSubmitted", goal: "list", continues: { goalId: b, text: "deeper still" } })
      for (const events of [yield* ended(a), eventsB, eventsC]) expect((yield* Replay.verify(events)).reason).toBe("max_iterations")
      const waiting = (yield* rx.submit({ goal: "wait" })).goalId
      expect(yield* Effect.flip(rx.submit({ goal: "x", continues: waiting }))).toMatchObject({ _tag: "@rx/server/Conflict", goalId: waiting })
      expect(yield* Effect.flip(rx.submit({ goal: "x", continues: "nope" }))).toMatchObject({ _tag: "@rx/server/NotFound" })
      yield* rx.cancel(waiting)
    }))

  it.scopedLive("a server that cannot be reached, or goes away under a follower, is a ClientError naming its URL", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("rx-client-")
      const scope = yield* Scope.make()
      const server = yield* Scope.extend(startServer(modelByGoal(() => Effect.never), {}, { db: path.join(dir, "rx.db") }), scope)
      const rx = yield* clientOf(server)
      const { goalId } = yield* rx.submit({ goal: "never ends" })
      const following = yield* Deferred.make<void>()
      const follower = yield* Effect.fork(Stream.runDrain(Stream.tap(rx.events(goalId), () => Deferred.succeed(following, undefined))))
      yield* Deferred.await(following)
      yield* Scope.close(scope, Exit.void)
      const gone = yield* Fiber.join(follower).pipe(Effect.flip)
      expect(gone).toMatchObject({ _tag: "@rx/server/ClientError", url: server.url })
      expect(gone.message).toContain(`cannot reach the rx server at ${server.url}`)
      expect(yield* Effect.flip(rx.goal(goalId))).toMatchObject({ _tag: "@rx/server/ClientError" })
    }))
})
