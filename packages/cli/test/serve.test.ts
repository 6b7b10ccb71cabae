/**
 * `rx serve`, the real binary: goals submitted over HTTP with the token it wrote, their events
 * followed to the end, and SIGTERM draining the server with a goal left open and recorded, which
 * the next start resumes and finishes.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox, start, until } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** Start `rx serve` on a free port; resolves with its URL and token once it listens. */
const serve = (box: ReturnType<typeof sandbox>, baseUrl: string) =>
  Effect.gen(function*() {
    const child = start(["serve", "--port", "0", "--db", box.db, "--workspace", box.workspace, "--base-url", baseUrl, "--model", "fake", "--sandbox", "none"])
    yield* until(() => /listening on (http:\/\/\S+)/.test(child.output().stdout) || child.exitCode !== null, "rx serve to listen")
    const url = /listening on (http:\/\/\S+)/.exec(child.output().stdout)?.[1] ?? ""
    expect(url, child.output().stderr).not.toBe("")
    const tokenFile = join(box.root, "rx-server.token")
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600)
    const token = readFileSync(tokenFile, "utf8").trim()
    const request = (path: string, init: RequestInit = {}) =>
      Effect.promise(() => fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...init.headers } }))
    /** A goal's events as JSON lines, followed until it terminates. */
    const follow = (goalId: string) =>
      Effect.flatMap(request(`/v1/goals/${goalId}/events`), (response) => Effect.promise(() => response.text())).pipe(Effect.map(jsonLines))
    return { child, url, request, follow }
  })

describe("rx serve", () => {
  it.scopedLive("runs a goal submitted over HTTP; its events stream to Terminated; SIGTERM stops the server", () =>
    Effect.gen(function*() {
      const model = yield* FakeServer.make([call("write_file", { path: "out.txt", content: "from the server" }), done("written")])
      const box = sandbox()
      const { child, follow, request, url } = yield* serve(box, model.baseUrl)
      expect((yield* Effect.promise(() => fetch(`${url}/v1/goals`))).status).toBe(401)
      const submitted = yield* request("/v1/goals", { method: "POST", body: JSON.stringify({ goal: "write out.txt" }) })
      expect(submitted.status).toBe(202)
      const { goalId } = (yield* Effect.promise(() => submitted.json())) as { goalId: string }
      const events = yield* follow(goalId)
      expect(events.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(readFileSync(join(box.workspace, "out.txt"), "utf8")).toBe("from the server")
      child.kill("SIGTERM")
      const ended = yield* Effect.promise(() => child.done)
      expect(ended.code, ended.stderr).toBe(0)
      // The same log, read by the CLI.
      expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)
    }), 30_000)

  it.scopedLive("SIGTERM during a model call leaves the goal open (Suspended(shutdown)); the next start resumes and finishes it", () =>
    Effect.gen(function*() {
      const model = yield* FakeServer.make([{ kind: "stall" }, done("after the restart")])
      const box = sandbox()
      const first = yield* serve(box, model.baseUrl)
      const submitted = yield* first.request("/v1/goals", { method: "POST", body: JSON.stringify({ goal: "wait" }) })
      const { goalId } = (yield* Effect.promise(() => submitted.json())) as { goalId: string }
      yield* model.waitFor(1)
      first.child.kill("SIGTERM")
      const stopped = yield* Effect.promise(() => first.child.done)
      expect(stopped.code, stopped.stderr).toBe(0)
      const open = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout)
      expect(open.at(-1)).toMatchObject({ _tag: "Suspended", reason: "shutdown" })
      const second = yield* serve(box, model.baseUrl)
      const events = yield* second.follow(goalId)
      expect(events.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done", detail: "after the restart" })
      second.child.kill("SIGTERM")
      expect((yield* Effect.promise(() => second.child.done)).code).toBe(0)
    }), 30_000)
})
