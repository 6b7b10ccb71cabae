/**
 * The edges of the API against a real server: the bearer token, Host and Origin checks, body
 * size, typed error bodies (400 naming the field, 404, 409, 413, 503), and the OpenAPI document.
 */
import { describe, expect, it } from "@effect/vitest"
import { StateStore } from "@rx/kernel"
import { View } from "@rx/server"
import { Context, DefaultServices, Effect, Fiber, Schema, Tracer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { call, listThenDone, modelByGoal, startServer, token, withStore } from "./helpers.js"

const never = modelByGoal(() => Effect.never)

describe("security", () => {
  it.scopedLive("every route but /healthz needs the bearer token; a wrong one is refused too", () =>
    Effect.gen(function*() {
      const server = yield* startServer(never)
      for (const route of ["/v1/goals", "/v1/goals/any", "/v1/goals/any/events", "/openapi.json"]) {
        const none = yield* call(server, route, { token: null })
        expect(none.status).toBe(401)
        expect(none.body).toMatchObject({ _tag: "@rx/server/Unauthorized" })
        expect(none.headers["www-authenticate"]).toBe("Bearer realm=\"rx\"")
        const wrong = yield* call(server, route, { token: "test-token-0123456789abcdeX" })
        expect(wrong.status).toBe(401)
      }
      const submit = yield* call(server, "/v1/goals", { method: "POST", body: { goal: "x" }, token: null })
      expect(submit.status).toBe(401)
      const health = yield* call(server, "/healthz", { token: null })
      expect(health.status).toBe(200)
      expect(health.body).toEqual({ status: "ok" })
      // Nothing was recorded by the refused submission.
      expect(((yield* call(server, "/v1/goals")).body as { goals: ReadonlyArray<unknown> }).goals).toEqual([])
    }))

  it.scopedLive("a Host other than the server's (DNS rebinding) and an Origin of another site are refused, even on /healthz", () =>
    Effect.gen(function*() {
      const server = yield* startServer(never)
      const port = new URL(server.url).port
      for (const host of ["evil.example", `evil.example:${port}`, "127.0.0.1:1", `localhost.evil.example:${port}`]) {
        const refused = yield* call(server, "/healthz", { headers: { host } })
        expect(refused.status).toBe(403)
        expect(refused.body).toMatchObject({ _tag: "@rx/server/Forbidden" })
      }
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`]) {
        expect((yield* call(server, "/healthz", { headers: { host } })).status).toBe(200)
      }
      for (const origin of ["http://evil.example", `http://evil.example:${port}`, "null", `http://127.0.0.1:${Number(port) + 1}`]) {
        const refused = yield* call(server, "/v1/goals", { headers: { origin } })
        expect(refused.status).toBe(403)
        expect(refused.body).toMatchObject({ _tag: "@rx/server/Forbidden" })
      }
      expect((yield* call(server, "/v1/goals", { headers: { origin: `http://localhost:${port}` } })).status).toBe(200)
    }))

  it.scopedLive("an address other machines can reach needs allowRemote; loopback addresses do not", () =>
    Effect.gen(function*() {
      for (const host of ["0.0.0.0", "::", "192.168.1.10", "example.com"]) {
        const refused = yield* Effect.flip(startServer(never, { host }))
        expect(refused).toMatchObject({ _tag: "@rx/server/InvalidConfig" })
        expect(String((refused as { message: string }).message)).toContain(`host ${host} lets other machines reach the server`)
      }
      const everywhere = yield* startServer(never, { host: "0.0.0.0", allowRemote: true })
      expect((yield* call(everywhere, "/healthz")).status).toBe(200)
      const loopback = yield* startServer(never, { host: "localhost" })
      expect((yield* call(loopback, "/healthz")).status).toBe(200)
    }))

  it.scopedLive("allowedHosts adds names clients may use", () =>
    Effect.gen(function*() {
      const server = yield* startServer(never, { allowedHosts: ["rx.internal", "proxy.example:8443"] })
      const port = new URL(server.url).port
      expect((yield* call(server, "/healthz", { headers: { host: `rx.internal:${port}` } })).status).toBe(200)
      expect((yield* call(server, "/healthz", { headers: { host: "proxy.example:8443" } })).status).toBe(200)
      expect((yield* call(server, "/healthz", { headers: { host: "rx.internal:1" } })).status).toBe(403)
    }))
})

describe("errors", () => {
  it.scopedLive("400 names the field: the goal, an option, an unknown field, the workspace, the JSON, a parameter", () =>
    Effect.gen(function*() {
      const server = yield* startServer(never)
      fs.mkdirSync(path.join(server.root, "project"))
      fs.writeFileSync(path.join(server.root, "file.txt"), "")
      fs.symlinkSync(path.dirname(server.root), path.join(server.root, "out"))
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{}, "goal"],
        [{ goal: 5 }, "goal"],
        [{ goal: "   " }, "goal"],
        [{ goal: "x", options: { maxIterations: -1 } }, "options.maxIterations"],
        [{ goal: "x", options: { approval: { shell: "sometimes" } } }, "options.approval.shell"],
        [{ goal: "x", options: { metadata: { baseUrl: "http://elsewhere" } } }, "options.metadata"],
        // The goal's settings (its workspace, its model) are the server's to record.
        [{ goal: "x", options: { settings: { workspace: "/" } } }, "options.settings"],
        [{ goal: "x", model: "other" }, "model"],
        [{ goal: "x", workspace: "../elsewhere" }, "workspace"],
        [{ goal: "x", workspace: "/etc" }, "workspace"],
        [{ goal: "x", workspace: "missing" }, "workspace"],
        [{ goal: "x", workspace: "file.txt" }, "workspace"],
        [{ goal: "x", workspace: "out" }, "workspace"]
      ]
      for (const [body, field] of cases) {
        const reply = yield* call(server, "/v1/goals", { method: "POST", body })
        expect([JSON.stringify(body), reply.status]).toEqual([JSON.stringify(body), 400])
        expect(reply.body).toMatchObject({ _tag: "@rx/server/BadRequest", field })
      }
      const notJson = yield* call(server, "/v1/goals", { method: "POST", raw: "{goal:" })
      expect(notJson.body).toMatchObject({ _tag: "@rx/server/BadRequest", field: "body" })
      for (const [query, field] of [["limit=0", "limit"], ["limit=x", "limit"], ["status=running", "status"], ["cursor=nope", "cursor"]] as const) {
        const reply = yield* call(server, `/v1/goals?${query}`)
        expect(reply.status).toBe(400)
        expect(reply.body).toMatchObject({ _tag: "@rx/server/BadRequest", field })
      }
      const badFrom = yield* call(server, "/v1/goals/any/events?from=-1")
      expect(badFrom.body).toMatchObject({ field: "from" })
      const badId = yield* call(server, "/v1/goals/any/events", { headers: { "last-event-id": "x" } })
      expect(badId.body).toMatchObject({ field: "last-event-id" })
      const decision = yield* call(server, "/v1/goals/any/approvals/c", { method: "POST", body: { approve: "yes" } })
      expect(decision.body).toMatchObject({ field: "approve" })
      // A valid workspace inside the root is accepted.
      const ok = yield* call(server, "/v1/goals", { method: "POST", body: { goal: "x", workspace: "project" } })
      expect(ok.status).toBe(202)
      // No stack trace in any error body.
      expect(notJson.text).not.toMatch(/\bat .*\.ts:\d+/)
    }))

  it.scopedLive("413 for a body over maxBodyBytes, declared or chunked, and the connection still answers", () =>
    Effect.gen(function*() {
      const server = yield* startServer(never, { maxBodyBytes: 1_024 })
      const big = { goal: "x".repeat(2_000) }
      const declared = yield* call(server, "/v1/goals", { method: "POST", body: big })
      expect(declared.status).toBe(413)
      expect(declared.body).toMatchObject({ _tag: "@rx/server/PayloadTooLarge", limit: 1_024 })
      const chunked = yield* call(server, "/v1/goals", { method: "POST", chunked: JSON.stringify(big) })
      expect(chunked.status).toBe(413)
      expect(((yield* call(server, "/v1/goals")).body as { goals: ReadonlyArray<unknown> }).goals).toEqual([])
      const small = yield* call(server, "/v1/goals", { method: "POST", chunked: JSON.stringify({ goal: "small enough" }) })
      expect(small.status).toBe(202)
    }))

  it.scopedLive("404 for an unknown goal or route; 409 for what a goal's state does not allow", () =>
    Effect.gen(function*() {
      const server = yield* startServer(modelByGoal(listThenDone))
      for (const [route, method] of [
        ["/v1/goals/nope", "GET"],
        ["/v1/goals/nope/events", "GET"],
        ["/v1/goals/nope/view", "GET"],
        ["/v1/goals/nope/cancel", "POST"],
        ["/v1/goals/nope/resume", "POST"]
      ] as const) {
        const reply = yield* call(server, route, { method })
        expect([route, reply.status]).toEqual([route, 404])
        expect(reply.body).toMatchObject({ _tag: "@rx/server/NotFound", goalId: "nope" })
      }
      const decide = yield* call(server, "/v1/goals/nope/approvals/c", { method: "POST", body: { approve: true } })
      expect(decide.status).toBe(404)
      const route = yield* call(server, "/v2/anything")
      expect(route.status).toBe(404)
      expect(route.body).toMatchObject({ _tag: "@rx/server/NotFound" })

      const { goalId } = (yield* call(server, "/v1/goals", { method: "POST", body: { goal: "list" } })).body as { goalId: string }
      for (let i = 0; i < 200; i++) {
        if (((yield* call(server, `/v1/goals/${goalId}`)).body as { status: string }).status === "terminated") break
        yield* Effect.sleep("20 millis")
      }
      for (const [suffix, body] of [["cancel", undefined], ["resume", undefined], [`approvals/${goalId}:1`, { approve: true }]] as const) {
        const reply = yield* call(server, `/v1/goals/${goalId}/${suffix}`, { method: "POST", body })
        expect([suffix, reply.status]).toEqual([suffix, 409])
        expect(reply.body).toMatchObject({ _tag: "@rx/server/Conflict", goalId })
      }
    }))

  it.scopedLive("503 when the queue is full: the submission records nothing", () =>
    Effect.gen(function*() {
      const server = yield* startServer(never, { concurrency: 1, maxQueued: 1 })
      expect((yield* call(server, "/v1/goals", { method: "POST", body: { goal: "runs" } })).status).toBe(202)
      expect((yield* call(server, "/v1/goals", { method: "POST", body: { goal: "waits" } })).status).toBe(202)
      const refused = yield* call(server, "/v1/goals", { method: "POST", body: { goal: "refused" } })
      expect(refused.status).toBe(503)
      expect(refused.body).toMatchObject({ _tag: "@rx/server/Unavailable", reason: "queue_full" })
      const goals = ((yield* call(server, "/v1/goals")).body as { goals: ReadonlyArray<{ goal: string; activity: string }> }).goals
      expect(goals.map((g) => [g.goal, g.activity])).toEqual([["waits", "queued"], ["runs", "running"]])
    }))

  it.scopedLive("503 past maxSubscribers followers of events", () =>
    Effect.gen(function*() {
      const server = yield* startServer(never, { maxSubscribers: 1 })
      const { goalId } = (yield* call(server, "/v1/goals", { method: "POST", body: { goal: "followed" } })).body as { goalId: string }
      const first = yield* Effect.forkScoped(call(server, `/v1/goals/${goalId}/events`))
      yield* Effect.sleep("200 millis")
      const second = yield* call(server, `/v1/goals/${goalId}/events`)
      expect(second.status).toBe(503)
      expect(second.body).toMatchObject({ _tag: "@rx/server/Unavailable", reason: "too_many_subscribers" })
      yield* Fiber.interrupt(first)
    }))
})

describe("the view", () => {
  it.scopedLive("GET /v1/goals/{id}/view is View.Goal, built from the goal's log and its store as rx inspect builds it", () =>
    Effect.gen(function*() {
      const server = yield* startServer(modelByGoal(listThenDone))
      const { goalId } = (yield* call(server, "/v1/goals", { method: "POST", body: { goal: "list" } })).body as { goalId: string }
      // Up to a minute for the goal to end: a busy machine runs it slowly.
      for (let i = 0; i < 3_000; i++) {
        if (((yield* call(server, `/v1/goals/${goalId}`)).body as { status: string }).status === "terminated") break
        yield* Effect.sleep("20 millis")
      }
      const reply = yield* call(server, `/v1/goals/${goalId}/view`)
      expect(reply.status).toBe(200)
      const view = Schema.decodeUnknownSync(View.Goal)(reply.body)
      const expected = yield* withStore(server.db, Effect.flatMap(View.fromStore(goalId, () => Effect.succeed(false)), (found) => found))
      expect(view).toEqual(expected)
      expect(view).toMatchObject({ goalId, status: "terminated", phase: { _tag: "terminated", reason: "done" }, iterations: 2, children: [], forks: [] })
      expect(view.steps.map((s) => s.entries.map((e) => e._tag))).toEqual([
        ["ModelResponded", "Call", "IterationCompleted"],
        ["ModelResponded", "IterationCompleted", "Terminated"]
      ])
      expect(yield* withStore(server.db, Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId)))).toHaveLength(view.events)
    }), 90_000)
})

describe("openapi", () => {
  it.scopedLive("GET /openapi.json (with the token) describes every route, its bodies and its errors", () =>
    Effect.gen(function*() {
      const server = yield* startServer(never)
      const reply = yield* call(server, "/openapi.json")
      expect(reply.status).toBe(200)
      const spec = reply.body as {
        openapi: string
        paths: Record<string, Record<string, { responses: Record<string, unknown> }>>
      }
      expect(spec.openapi).toMatch(/^3\./)
      expect(Object.keys(spec.paths).sort()).toEqual([
        "/healthz",
        "/openapi.json",
        "/v1/goals",
        "/v1/goals/{id}",
        "/v1/goals/{id}/approvals/{callId}",
        "/v1/goals/{id}/cancel",
        "/v1/goals/{id}/events",
        "/v1/goals/{id}/messages",
        "/v1/goals/{id}/resume",
        "/v1/goals/{id}/view"
      ])
      const submit = spec.paths["/v1/goals"]?.["post"]
      expect(Object.keys(submit?.responses ?? {}).sort()).toEqual(["202", "400", "401", "403", "404", "409", "413", "500", "503"])
      expect(JSON.stringify(spec)).toContain("SubmitRequest")
    }))
})

describe("tracing", () => {
  it.scopedLive("under a tracer, each request has its span", () =>
    Effect.gen(function*() {
      const native = Context.get(DefaultServices.liveServices, Tracer.Tracer)
      const recording = (names: Array<string>) =>
        Tracer.make({
          span: (name, parent, context, links, startTime, kind, options) => {
            names.push(name)
            return native.span(name, parent, context, links, startTime, kind, options)
          },
          context: native.context
        })
      const traced: Array<string> = []
      const server = yield* Effect.withTracer(startServer(never), recording(traced))
      expect((yield* call(server, "/healthz")).status).toBe(200)
      expect((yield* call(server, "/v1/goals/nope")).status).toBe(404)
      expect(traced.filter((name) => name.startsWith("http."))).toEqual(["http.server GET", "http.server GET"])
    }))
})

describe("HEAD", () => {
  it.scopedLive("HEAD on a running goal's events answers the stream's status and headers at once", () =>
    Effect.gen(function*() {
      const server = yield* startServer(never)
      const submitted = yield* call(server, "/v1/goals", { method: "POST", body: { goal: "runs until stopped" } })
      const goalId = (submitted.body as { goalId: string }).goalId
      const head = yield* Effect.promise(() => fetch(`${server.url}/v1/goals/${goalId}/events`, { method: "HEAD", headers: { authorization: `Bearer ${token}` } }))
        .pipe(Effect.timeout("10 seconds"))
      expect([head.status, head.headers.get("content-type"), head.headers.get("cache-control")]).toEqual([200, "application/x-ndjson", "no-cache"])
    }))
})
