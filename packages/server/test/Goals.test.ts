/**
 * Goals over HTTP against a real server, SQLite log and tools: submit and follow to the end
 * (JSON lines and SSE), reconnect mid-run with Last-Event-ID, many goals under the concurrency
 * limit, cancel, approve and deny.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Event, LanguageModel, StateStore } from "@rx/kernel"
import { Toolbox } from "@rx/server"
import { Builtins } from "@rx/tools"
import { Deferred, Effect, Layer, Ref, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { call, collect, jsonLines, listThenDone, listTwiceAfter, modelByGoal, open, sseEvents, startServer, until, withStore } from "./helpers.js"

const seqs = (events: ReadonlyArray<Event.Event>) => events.map((event) => event.seq)
const range = (n: number) => Array.from({ length: n }, (_, i) => i)

describe("goals", () => {
  it.scopedLive("POST /v1/goals answers 202 once GoalSubmitted is durable; the events stream as JSON lines to Terminated", () =>
    Effect.gen(function*() {
      const server = yield* startServer(modelByGoal(listThenDone))
      const submitted = yield* call(server, "/v1/goals", { method: "POST", body: { goal: "list the workspace" } })
      expect(submitted.status).toBe(202)
      const { goalId } = submitted.body as { goalId: string }
      // Durable before the reply: another connection to the file sees it.
      const stored = yield* withStore(server.db, Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId)))
      expect(stored[0]?._tag).toBe("GoalSubmitted")

      const response = yield* open(server, `/v1/goals/${goalId}/events`)
      expect(response.status).toBe(200)
      expect(response.headers["content-type"]).toContain("application/x-ndjson")
      const events = yield* collect(jsonLines(response))
      expect(events[events.length - 1]).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(seqs(events)).toEqual(range(events.length))
      const log = yield* withStore(server.db, Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId)))
      expect(events).toEqual(log)
      expect(events.map((e) => e._tag)).toContain("ToolSucceeded")

      const goal = yield* call(server, `/v1/goals/${goalId}`)
      expect(goal.status).toBe(200)
      expect(goal.body).toMatchObject({ goalId, status: "terminated", reason: "done", detail: "listed", approval: null, activity: "idle" })
      const answered = events.findLast((e) => e._tag === "ModelResponded")
      expect((goal.body as { audit: unknown }).audit).toEqual({
        reason: "done",
        seq: events.length - 1,
        at: events[events.length - 1]?.at,
        detail: "listed",
        limit: "the model called done",
        evidence: [answered?.seq]
      })
    }))

  it.scopedLive("SSE: each event's id is its seq; Last-Event-ID mid-run resumes exactly after it, each event once", () =>
    Effect.gen(function*() {
      // The model waits at its second answer until the test lets it go on.
      const gate = yield* Deferred.make<void>()
      const server = yield* startServer(modelByGoal(listTwiceAfter(gate)))
      const { goalId } = (yield* call(server, "/v1/goals", { method: "POST", body: { goal: "list twice" } })).body as { goalId: string }
      yield* until(server.db, goalId, (events) => events.some((e) => e._tag === "IterationCompleted"), "the first iteration")

      // First connection: read what is there so far, then hang up.
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const response = yield* open(server, `/v1/goals/${goalId}/events`, { headers: { accept: "text/event-stream" } })
        expect(response.headers["content-type"]).toContain("text/event-stream")
        return yield* collect(sseEvents(response).pipe(Stream.takeUntil(({ event }) => event._tag === "IterationCompleted")))
      }))
      for (const { event, id } of first) expect(id).toBe(String(event.seq))
      const last = first[first.length - 1]
      if (last === undefined) return expect.fail("no events on the first connection")

      yield* Deferred.succeed(gate, undefined)
      const second = yield* Effect.scoped(Effect.gen(function*() {
        const response = yield* open(server, `/v1/goals/${goalId}/events`, {
          headers: { accept: "text/event-stream", "last-event-id": last.id ?? "" }
        })
        return yield* collect(sseEvents(response))
      }))
      const all = [...first, ...second].map(({ event }) => event)
      expect(seqs(all)).toEqual(range(all.length))
      expect(all[all.length - 1]).toMatchObject({ _tag: "Terminated", reason: "done" })
      const log = yield* withStore(server.db, Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId)))
      expect(all).toEqual(log)

      // ?from= does what Last-Event-ID does; past the end of a terminated goal, SSE says 204 (no reconnecting).
      const tail = yield* Effect.scoped(Effect.flatMap(open(server, `/v1/goals/${goalId}/events?from=${log.length - 2}`), (r) => collect(jsonLines(r))))
      expect(seqs(tail)).toEqual([log.length - 1])
      const done = yield* call(server, `/v1/goals/${goalId}/events`, { headers: { accept: "text/event-stream", "last-event-id": String(log.length - 1) } })
      expect(done.status).toBe(204)
      const none = yield* call(server, `/v1/goals/${goalId}/events?from=${log.length - 1}`)
      expect([none.status, none.text]).toEqual([200, ""])
    }))

  it.scopedLive("many goals run at most `concurrency` at once, the rest queued in the order submitted, all to done", () =>
    Effect.gen(function*() {
      const active = yield* Ref.make(0)
      const peak = yield* Ref.make(0)
      const started = yield* Ref.make<ReadonlyArray<string>>([])
      // Every first answer waits until all goals are submitted, so the queue fills.
      const gate = yield* Deferred.make<void>()
      const server = yield* startServer(
        modelByGoal((goal, turn) =>
          turn > 0
            ? Effect.succeed(LanguageModel.done("ok"))
            : Effect.gen(function*() {
              yield* Ref.update(started, (list) => [...list, goal])
              const now = yield* Ref.updateAndGet(active, (n) => n + 1)
              yield* Ref.update(peak, (p) => Math.max(p, now))
              yield* Deferred.await(gate)
              yield* Effect.sleep("20 millis")
              yield* Ref.update(active, (n) => n - 1)
              return LanguageModel.callTool("list_dir", {})
            })
        ),
        { concurrency: 4 }
      )
      const goals = range(12).map((i) => `goal number ${i}`)
      const ids: Array<string> = []
      for (const goal of goals) {
        const reply = yield* call(server, "/v1/goals", { method: "POST", body: { goal } })
        expect(reply.status).toBe(202)
        ids.push((reply.body as { goalId: string }).goalId)
      }
      // Wait for the first four to reach the model.
      for (let i = 0; i < 200 && (yield* Ref.get(started)).length < 4; i++) yield* Effect.sleep("10 millis")
      const activities = yield* Effect.forEach(ids, (goalId) => Effect.map(call(server, `/v1/goals/${goalId}`), (r) => (r.body as { activity: string }).activity))
      expect(activities).toEqual([...Array(4).fill("running"), ...Array(8).fill("queued")])
      expect([...(yield* Ref.get(started))].sort()).toEqual(goals.slice(0, 4))
      yield* Deferred.succeed(gate, undefined)
      for (const goalId of ids) yield* until(server.db, goalId, (events) => events.some((e) => e._tag === "Terminated"), "its end")
      expect(yield* Ref.get(peak)).toBe(4)
      expect([...(yield* Ref.get(started))].sort()).toEqual([...goals].sort())

      const page = yield* call(server, "/v1/goals?status=terminated&limit=5")
      const listed = page.body as { goals: ReadonlyArray<{ goalId: string; reason: string }>; cursor: string | null }
      expect(listed.goals.map((g) => g.goalId)).toEqual([...ids].reverse().slice(0, 5))
      expect(listed.goals.every((g) => g.reason === "done")).toBe(true)
      const next = yield* call(server, `/v1/goals?status=terminated&limit=10&cursor=${listed.cursor ?? ""}`)
      const rest = next.body as { goals: ReadonlyArray<{ goalId: string }>; cursor: string | null }
      expect(rest.goals.map((g) => g.goalId)).toEqual([...ids].reverse().slice(5))
      expect(rest.cursor).toBeNull()
    }))

  it.scopedLive("POST /v1/goals/{id}/cancel ends a running goal as cancelled", () =>
    Effect.gen(function*() {
      const server = yield* startServer(modelByGoal(() => Effect.never))
      const { goalId } = (yield* call(server, "/v1/goals", { method: "POST", body: { goal: "wait forever" } })).body as { goalId: string }
      const running = yield* call(server, `/v1/goals/${goalId}`)
      expect(running.body).toMatchObject({ status: "open", activity: "running" })
      const cancelled = yield* call(server, `/v1/goals/${goalId}/cancel`, { method: "POST" })
      expect(cancelled.status).toBe(202)
      const events = yield* Effect.scoped(Effect.flatMap(open(server, `/v1/goals/${goalId}/events`), (r) => collect(jsonLines(r))))
      expect(events[events.length - 1]).toMatchObject({ _tag: "Terminated", reason: "cancelled" })
      const again = yield* call(server, `/v1/goals/${goalId}/cancel`, { method: "POST" })
      expect(again.status).toBe(409)
      expect(again.body).toMatchObject({ _tag: "@rx/server/Conflict", goalId })
    }))

  it.scopedLive("a call that needs approval waits (status waiting); approving it over HTTP runs it exactly as requested", () =>
    Effect.gen(function*() {
      const server = yield* startServer(modelByGoal((_goal, turn) =>
        Effect.succeed(turn === 0 ? LanguageModel.callTool("write_file", { path: "note.txt", content: "approved\n" }) : LanguageModel.done("written"))
      ))
      const { goalId } = (yield* call(server, "/v1/goals", {
        method: "POST",
        body: { goal: "write a note", options: { approval: { write_file: "ask" } } }
      })).body as { goalId: string }
      yield* until(server.db, goalId, (events) => events.some((e) => e._tag === "Suspended"), "the suspension")
      const waiting = yield* call(server, `/v1/goals/${goalId}`)
      expect(waiting.body).toMatchObject({
        status: "waiting",
        suspended: { reason: "awaiting_approval" },
        approval: { callId: `${goalId}:1`, tool: "write_file", input: { path: "note.txt", content: "approved\n" } }
      })
      const listed = yield* call(server, "/v1/goals?status=waiting")
      expect((listed.body as { goals: ReadonlyArray<{ goalId: string }> }).goals.map((g) => g.goalId)).toEqual([goalId])
      expect(fs.existsSync(path.join(server.root, "note.txt"))).toBe(false)
      // ?follow=false: the events so far, then the response ends, though the goal is open.
      const sofar = yield* Effect.scoped(Effect.flatMap(open(server, `/v1/goals/${goalId}/events?follow=false`), (r) => collect(jsonLines(r))))
      expect(sofar.map((e) => e.seq)).toEqual(sofar.map((_, i) => i))
      expect(sofar[sofar.length - 1]).toMatchObject({ _tag: "Suspended", reason: "awaiting_approval" })
      const tail = yield* call(server, `/v1/goals/${goalId}/events?follow=false&from=${sofar.length - 1}`)
      expect(tail.text).toBe("")
      expect((yield* call(server, `/v1/goals/${goalId}/events?follow=maybe`)).body).toMatchObject({ _tag: "@rx/server/BadRequest", field: "follow" })

      const wrong = yield* call(server, `/v1/goals/${goalId}/approvals/${goalId}:9`, { method: "POST", body: { approve: true } })
      expect(wrong.status).toBe(409)
      const approved = yield* call(server, `/v1/goals/${goalId}/approvals/${goalId}:1`, { method: "POST", body: { approve: true } })
      expect(approved.status).toBe(202)
      const events = yield* Effect.scoped(Effect.flatMap(open(server, `/v1/goals/${goalId}/events`), (r) => collect(jsonLines(r))))
      expect(events[events.length - 1]).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(events.find((e) => e._tag === "ApprovalDecided")).toMatchObject({ approved: true, by: "http" })
      expect(fs.readFileSync(path.join(server.root, "note.txt"), "utf8")).toBe("approved\n")
      // Listing again: what the log said of the goal when it waited is not kept once it moved on.
      expect(((yield* call(server, "/v1/goals?status=waiting")).body as { goals: ReadonlyArray<unknown> }).goals).toEqual([])
      expect(((yield* call(server, "/v1/goals")).body as { goals: ReadonlyArray<unknown> }).goals).toMatchObject([{ goalId, status: "terminated", approval: null }])
    }))

  it.scopedLive("a workspace's tools may start with an approval policy (DefaultApproval); a submission's own comes on top", () =>
    Effect.gen(function*() {
      const toolbox = Toolbox.layerWith((workspace) =>
        Layer.merge(Builtins.layer({ workspace, sandbox: "none" }), Layer.succeed(Toolbox.DefaultApproval, { write_file: "ask", list_dir: "ask" }))
      )
      const server = yield* startServer(modelByGoal(() => Effect.never), {}, { toolbox })
      const submitted = (yield* call(server, "/v1/goals", { method: "POST", body: { goal: "x", options: { approval: { list_dir: "auto", shell: "deny" } } } })).body as { goalId: string }
      const first = (yield* withStore(server.db, Effect.flatMap(StateStore.StateStore, (store) => store.load(submitted.goalId))))[0]
      expect(first).toMatchObject({ _tag: "GoalSubmitted", options: { approval: { write_file: "ask", list_dir: "auto", shell: "deny" } } })
    }))

  it.scopedLive("denying a call over HTTP tells the model, and the goal goes on", () =>
    Effect.gen(function*() {
      const server = yield* startServer(modelByGoal((_goal, turn) =>
        Effect.succeed(turn === 0 ? LanguageModel.callTool("write_file", { path: "no.txt", content: "x" }) : LanguageModel.done("not written"))
      ))
      const { goalId } = (yield* call(server, "/v1/goals", {
        method: "POST",
        body: { goal: "write another note", options: { approval: { write_file: "ask" } } }
      })).body as { goalId: string }
      yield* until(server.db, goalId, (events) => events.some((e) => e._tag === "Suspended"), "the suspension")
      const denied = yield* call(server, `/v1/goals/${goalId}/approvals/${goalId}:1`, { method: "POST", body: { approve: false, reason: "not now" } })
      expect(denied.status).toBe(202)
      const events = yield* until(server.db, goalId, (log) => log.some((e) => e._tag === "Terminated"), "its end")
      expect(events.find((e) => e._tag === "ActionRejected")).toMatchObject({ kind: "denied" })
      expect(fs.existsSync(path.join(server.root, "no.txt"))).toBe(false)
    }))
})
