/**
 * The server attacked by its goals and its clients: a goal's `http_fetch` never reaches the
 * server that runs it (whatever the allow-list says, by any address form or redirect), so a goal
 * cannot submit or approve goals. A body nested thousands deep is a 400. A submission retried
 * with its `Idempotency-Key` answers the goal recorded first, even after a restart.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Event, LanguageModel, StateStore } from "@rx/kernel"
import { Toolbox } from "@rx/server"
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { call, modelByGoal, startServer, tempDir, token, until, withStore } from "./helpers.js"

/** A server on 127.0.0.1 that answers `hello`, or redirects `/to?url=`; its port. Closed with the scope. */
const bystander = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<http.Server>((resolve) => {
      const s = http.createServer((req, res) => {
        const url = new URL(req.url ?? "/", "http://x")
        if (url.pathname === "/to") {
          res.writeHead(307, { location: url.searchParams.get("url") ?? "/" })
          return res.end()
        }
        res.end("hello")
      })
      s.listen(0, "127.0.0.1", () => resolve(s))
    })
  ),
  (s) => Effect.sync(() => s.closeAllConnections()).pipe(Effect.zipRight(Effect.promise(() => new Promise((r) => s.close(r)))))
).pipe(Effect.map((s) => (s.address() as AddressInfo).port))

/** Every loopback and unspecified form, and every address, allowed: the widest `--http-allow`. */
const allowEverything = ["0.0.0.0/0", "::/0", "localhost"]

const terminated = (events: ReadonlyArray<Event.Event>) => events.some((e) => e._tag === "Terminated")

/** The outcome of a goal's one http_fetch call. */
const fetchOutcome = (events: ReadonlyArray<Event.Event>) => events.find((e) => e._tag === "ToolSucceeded" || e._tag === "ToolFailed")

describe("a goal against its own server", () => {
  it.scopedLive("http_fetch never reaches the server, by any address form or redirect, though the allow-list permits all: no goal is submitted or approved", () =>
    Effect.gen(function*() {
      const other = yield* bystander
      // The goal's first line is the URL it fetches; the server's port is known once it listens.
      let port = 0
      const target = (goal: string) => goal.replaceAll("PORT", String(port))
      const model = modelByGoal((goal, turn) =>
        Effect.succeed(
          turn === 0
            ? LanguageModel.callTool("http_fetch", {
              url: target(goal),
              method: "POST",
              headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
              body: JSON.stringify({ goal: "a copy of myself", options: { approval: {} } })
            })
            : LanguageModel.done("tried")
        )
      )
      const server = yield* startServer(model, { host: "0.0.0.0", allowRemote: true }, {
        toolbox: Toolbox.layer({ sandbox: "none", httpAllow: allowEverything })
      })
      port = Number(new URL(server.url).port)
      const own = Object.values(os.networkInterfaces()).flatMap((list) => list ?? []).filter((i) => i.family === "IPv4").map((i) => i.address)
      const urls = [
        "http://127.0.0.1:PORT/v1/goals",
        "http://localhost:PORT/v1/goals",
        "http://0.0.0.0:PORT/v1/goals",
        "http://127.0.0.2:PORT/v1/goals",
        "http://[::ffff:127.0.0.1]:PORT/v1/goals",
        "http://2130706433:PORT/v1/goals",
        "http://127.0.0.1:PORT/v1/goals/some-goal/approvals/some-call",
        `http://127.0.0.1:${other}/to?url=${encodeURIComponent("http://localhost:PORT/v1/goals")}`,
        ...own.map((address) => `http://${address}:PORT/v1/goals`)
      ]
      for (const url of urls) {
        const submitted = yield* call(server, "/v1/goals", { method: "POST", body: { goal: url } })
        expect(submitted.status).toBe(202)
        const { goalId } = submitted.body as { goalId: string }
        const events = yield* until(server.db, goalId, terminated, "the goal to end")
        const outcome = fetchOutcome(events)
        expect(outcome?._tag, url).toBe("ToolFailed")
        expect(JSON.stringify(outcome), url).toContain("@rx/tools/EndpointRefused")
      }
      // The same tools reach another local server: the refusal is the server's own, not the allow-list's.
      const control = yield* call(server, "/v1/goals", { method: "POST", body: { goal: `http://127.0.0.1:${other}/` } })
      const controlEvents = yield* until(server.db, (control.body as { goalId: string }).goalId, terminated, "the control goal to end")
      expect(fetchOutcome(controlEvents)?._tag).toBe("ToolSucceeded")
      // Only the goals submitted here exist: no goal submitted a copy of itself.
      const goals = yield* withStore(server.db, Effect.flatMap(StateStore.StateStore, (store) => store.goals()))
      expect(goals.map((g) => g.goal).filter((g) => g === "a copy of myself")).toEqual([])
      expect(goals).toHaveLength(urls.length + 1)
    }), 120_000)
})

describe("request bodies", () => {
  it.scopedLive("JSON nested 5,000 deep is a 400 that says so, wherever the nesting is; the server goes on", () =>
    Effect.gen(function*() {
      const server = yield* startServer(modelByGoal(() => Effect.succeed(LanguageModel.done("ok"))))
      const deep = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`
      const deepObject = (n: number) => `${"{\"a\":".repeat(n)}1${"}".repeat(n)}`
      const bodies = [
        deep(5_000),
        deepObject(5_000),
        `{"goal": ${deep(5_000)}}`,
        `{"goal": "x", "options": {"approval": ${deepObject(5_000)}}}`,
        `{"goal": "x", "workspace": ${deep(5_000)}}`,
        `{"goal": "x", "options": ${deepObject(100_000)}}`
      ]
      for (const raw of bodies) {
        const reply = yield* call(server, "/v1/goals", { method: "POST", raw })
        expect(reply.status, raw.slice(0, 60)).toBe(400)
        expect(reply.body, raw.slice(0, 60)).toMatchObject({ _tag: "@rx/server/BadRequest", field: "body" })
        expect(String((reply.body as { message: string }).message)).toContain("nested")
      }
      // A decision's body is read the same way.
      const decision = yield* call(server, "/v1/goals/g1/approvals/g1:1", { method: "POST", raw: deepObject(5_000) })
      expect(decision.status).toBe(400)
      // Brackets inside strings are text, not nesting.
      const fine = yield* call(server, "/v1/goals", { method: "POST", body: { goal: `${"[{\\\"".repeat(1_000)} is just text` } })
      expect(fine.status).toBe(202)
    }), 60_000)
})

describe("Idempotency-Key", () => {
  const doneAtOnce = modelByGoal(() => Effect.succeed(LanguageModel.done("ok")))
  const goalsIn = (db: string) => withStore(db, Effect.flatMap(StateStore.StateStore, (store) => store.goals()))
  const submit = (server: { readonly url: string; readonly root: string; readonly db: string }, body: unknown, key?: string) =>
    call(server, "/v1/goals", { method: "POST", body, headers: key === undefined ? {} : { "idempotency-key": key } })

  it.scopedLive("a retry with the same key and body answers the same goal, at once or in parallel; another body is a 409; no key, a new goal each time", () =>
    Effect.gen(function*() {
      const server = yield* startServer(doneAtOnce)
      const body = { goal: "write the report", options: { maxIterations: 5 } }
      const first = yield* submit(server, body, "retry-me-0001")
      expect(first.status).toBe(202)
      const { goalId } = first.body as { goalId: string }
      yield* until(server.db, goalId, terminated, "the goal to end")
      // The same request, its keys in another order: the same goal, not run again.
      const again = yield* call(server, "/v1/goals", { method: "POST", raw: JSON.stringify({ options: { maxIterations: 5 }, goal: "write the report" }), headers: { "idempotency-key": "retry-me-0001" } })
      expect(again.status).toBe(202)
      expect(again.body).toEqual({ goalId })
      const events = yield* withStore(server.db, Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId)))
      expect(events.filter((e) => e._tag === "Terminated")).toHaveLength(1)
      expect(events.filter((e) => e._tag === "ModelResponded")).toHaveLength(1)

      const changed = yield* submit(server, { ...body, goal: "write another report" }, "retry-me-0001")
      expect(changed.status).toBe(409)
      expect(changed.body).toMatchObject({ _tag: "@rx/server/Conflict", goalId })
      expect((changed.body as { message: string }).message).toContain("was used for another request")

      // Ten attempts at once with a new key: one goal.
      const parallel = yield* Effect.forEach(Array.from({ length: 10 }, () => 0), () => submit(server, { goal: "once only" }, "parallel-key"), { concurrency: "unbounded" })
      expect(parallel.map((r) => r.status)).toEqual(Array(10).fill(202))
      expect(new Set(parallel.map((r) => (r.body as { goalId: string }).goalId)).size).toBe(1)

      // Without a key, each POST is a goal of its own.
      expect((yield* submit(server, body)).status).toBe(202)
      expect((yield* submit(server, body)).status).toBe(202)
      expect((yield* goalsIn(server.db)).map((g) => g.goal).sort()).toEqual(["once only", "write the report", "write the report", "write the report"])

      for (const bad of ["has space", "x".repeat(256), ""]) {
        const refused = yield* submit(server, body, bad)
        expect(refused.status, bad).toBe(400)
        expect(refused.body, bad).toMatchObject({ _tag: "@rx/server/BadRequest", field: "idempotency-key" })
      }
      expect(yield* goalsIn(server.db)).toHaveLength(4)
    }), 60_000)

  it.scopedLive("is durable: after a restart on the same log, a retry finds the goal recorded before", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("rx-server-root-")
      const db = path.join(yield* tempDir("rx-server-db-"), "rx.db")
      const body = { goal: "survive a restart" }
      const goalId = yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* startServer(doneAtOnce, {}, { root, db })
        const first = yield* submit(server, body, "3f2b1c9e-restart")
        expect(first.status).toBe(202)
        const { goalId } = first.body as { goalId: string }
        yield* until(db, goalId, terminated, "the goal to end")
        return goalId
      }))
      const server = yield* startServer(doneAtOnce, {}, { root, db })
      const retried = yield* submit(server, body, "3f2b1c9e-restart")
      expect(retried.status).toBe(202)
      expect(retried.body).toEqual({ goalId })
      expect(yield* goalsIn(db)).toHaveLength(1)
      expect((yield* submit(server, { goal: "something else" }, "3f2b1c9e-restart")).status).toBe(409)
    }), 60_000)
})
