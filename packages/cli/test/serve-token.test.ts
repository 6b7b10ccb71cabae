/**
 * `rx serve`'s token file, attacked as an agent would: the file beside a log inside the served
 * root is out of the tools' reach (read_file, list_dir, search_text, find_files, the sandboxed
 * shell), a symbolic link planted at its path is replaced and never written through, and the
 * token is kept across restarts only when the file is exactly what rx wrote. And the
 * self-submitting goal: it can neither read the token nor reach the server with it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { chmodSync, lstatSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { bwrapWorks, jsonLines, rx, sandbox, start, until } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** `rx serve` on a free port with `db` and the box's workspace; its URL and stdout once it listens. Killed with the scope. */
const serve = (box: ReturnType<typeof sandbox>, db: string, baseUrl: string, extra: ReadonlyArray<string> = [], sandboxMode = "none") =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => start(["serve", "--port", "0", "--db", db, "--workspace", box.workspace, "--base-url", baseUrl, "--model", "fake", "--sandbox", sandboxMode, ...extra])),
      (child) => Effect.promise(() => (child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"), child.done))
    )
    yield* until(() => /listening on (http:\/\/\S+)/.test(child.output().stdout) || child.exitCode !== null, "rx serve to listen")
    const url = /listening on (http:\/\/\S+)/.exec(child.output().stdout)?.[1] ?? ""
    expect(url, child.output().stderr).not.toBe("")
    const stop = Effect.promise(() => (child.kill("SIGTERM"), child.done))
    return { child, url, stdout: child.output().stdout, stop }
  })

/** The status of `GET /v1/goals` with `token`. */
const statusWith = (url: string, token: string) =>
  Effect.promise(() => fetch(`${url}/v1/goals`, { headers: { authorization: `Bearer ${token}` } }).then((response) => response.status))

/** Submit a goal (in `workspace`, a folder of the served root) and follow its events to the end. */
const runGoal = (url: string, token: string, goal: string, workspace?: string) =>
  Effect.gen(function*() {
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
    const submitted = yield* Effect.promise(() => fetch(`${url}/v1/goals`, { method: "POST", headers, body: JSON.stringify({ goal, workspace }) }))
    expect(submitted.status).toBe(202)
    const { goalId } = (yield* Effect.promise(() => submitted.json())) as { goalId: string }
    const text = yield* Effect.promise(() => fetch(`${url}/v1/goals/${goalId}/events`, { headers }).then((response) => response.text()))
    return jsonLines(text)
  })

describe("rx serve: the token file", () => {
  it.scopedLive("beside a log inside the served root, no file tool reads, lists or finds it, from the root or from the log's folder as a goal's workspace", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const db = join(box.workspace, ".rx", "rx.db")
      const model = yield* FakeServer.make([
        call("read_file", { path: ".rx/rx-server.token" }),
        call("list_dir", { path: ".rx" }),
        call("search_text", { pattern: "[A-Za-z0-9_-]{43}", path: ".rx" }),
        call("search_text", { pattern: "[A-Za-z0-9_-]{43}" }),
        call("find_files", { pattern: "*token*" }),
        done("tried"),
        // A goal whose workspace is the log's folder itself.
        call("read_file", { path: "rx-server.token" }),
        call("list_dir", {}),
        done("tried")
      ])
      const server = yield* serve(box, db, model.baseUrl)
      const token = readFileSync(join(box.workspace, ".rx", "rx-server.token"), "utf8").trim()
      const events = yield* runGoal(server.url, token, "read the server's token")
      const outcomes = events.filter((e) => e["_tag"] === "ToolSucceeded" || e["_tag"] === "ToolFailed")
      expect(outcomes.map((e) => [e["tool"], e["_tag"]])).toEqual([
        ["read_file", "ToolFailed"],
        ["list_dir", "ToolSucceeded"],
        ["search_text", "ToolSucceeded"],
        ["search_text", "ToolSucceeded"],
        ["find_files", "ToolSucceeded"]
      ])
      expect(JSON.stringify(outcomes[0]?.["error"])).toContain("hidden from the agent")
      for (const outcome of outcomes) {
        expect(JSON.stringify(outcome)).not.toContain(token)
        expect(JSON.stringify(outcome["output"] ?? null)).not.toContain("rx-server.token")
      }
      const inner = (yield* runGoal(server.url, token, "read the server's token from its folder", ".rx"))
        .filter((e) => e["_tag"] === "ToolSucceeded" || e["_tag"] === "ToolFailed")
      expect(inner.map((e) => [e["tool"], e["_tag"]])).toEqual([["read_file", "ToolFailed"], ["list_dir", "ToolSucceeded"]])
      expect(JSON.stringify(inner)).not.toContain(token)
      expect(JSON.stringify(inner[1]?.["output"])).not.toContain("rx-server.token")
      yield* server.stop
    }), 60_000)

  it.scopedLive.skipIf(!bwrapWorks)("rx run with that log: neither read_file nor the sandboxed shell reads it", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const db = join(box.workspace, ".rx", "rx.db")
      const idle = yield* FakeServer.make([])
      const server = yield* serve(box, db, idle.baseUrl)
      yield* server.stop
      const token = readFileSync(join(box.workspace, ".rx", "rx-server.token"), "utf8").trim()
      const model = yield* FakeServer.make([
        call("read_file", { path: ".rx/rx-server.token" }),
        call("shell", { command: "cat .rx/rx-server.token; echo rc=$?" }),
        done("tried")
      ])
      const ran = yield* rx(["run", "read the server's token", "--json", "--db", db, "--workspace", box.workspace, "--base-url", model.baseUrl, "--model", "fake", "--sandbox", "bwrap"])
      expect(ran.code, ran.stderr).toBe(0)
      const outcomes = jsonLines(ran.stdout).filter((e) => e["_tag"] === "ToolSucceeded" || e["_tag"] === "ToolFailed")
      expect(outcomes.map((e) => [e["tool"], e["_tag"]])).toEqual([["read_file", "ToolFailed"], ["shell", "ToolSucceeded"]])
      expect(ran.stdout).not.toContain(token)
    }), 60_000)

  it.scopedLive("a symbolic link planted at its path is replaced: the file it points at is neither written nor chmod-ed, nor its content taken as the token", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const outside = join(box.root, "outside")
      mkdirSync(outside)
      const victim = join(outside, "victim")
      // Looks like a token file rx wrote: only the link gives it away.
      const planted = `${"A".repeat(43)}\n`
      writeFileSync(victim, planted, { mode: 0o600 })
      chmodSync(victim, 0o600)
      const before = statSync(victim)
      const file = join(box.root, "rx-server.token")
      symlinkSync(victim, file)
      const idle = yield* FakeServer.make([])
      const server = yield* serve(box, box.db, idle.baseUrl)
      expect(server.stdout).toContain(`token: in ${file}, new`)
      expect(readFileSync(victim, "utf8")).toBe(planted)
      const after = statSync(victim)
      expect(after.mode).toBe(before.mode)
      expect(after.mtimeMs).toBe(before.mtimeMs)
      const written = lstatSync(file)
      expect(written.isFile()).toBe(true)
      expect(written.mode & 0o777).toBe(0o600)
      const token = readFileSync(file, "utf8").trim()
      expect(token).not.toBe(planted.trim())
      expect(yield* statusWith(server.url, token)).toBe(200)
      expect(yield* statusWith(server.url, planted.trim())).toBe(401)
      yield* server.stop
    }), 60_000)

  it.scopedLive("is kept across restarts when it is the 0600 file rx wrote; --new-token or wider rights make a new one", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const file = join(box.root, "rx-server.token")
      const idle = yield* FakeServer.make([])
      const first = yield* serve(box, box.db, idle.baseUrl)
      expect(first.stdout).toContain(`token: in ${file}, new`)
      const token = readFileSync(file, "utf8").trim()
      yield* first.stop

      const second = yield* serve(box, box.db, idle.baseUrl)
      expect(second.stdout).toContain(`token: in ${file}, kept from the last start`)
      expect(readFileSync(file, "utf8").trim()).toBe(token)
      expect(yield* statusWith(second.url, token)).toBe(200)
      yield* second.stop

      const renewed = yield* serve(box, box.db, idle.baseUrl, ["--new-token"])
      expect(renewed.stdout).toContain(`token: in ${file}, new`)
      const fresh = readFileSync(file, "utf8").trim()
      expect(fresh).not.toBe(token)
      expect(yield* statusWith(renewed.url, token)).toBe(401)
      yield* renewed.stop

      // Readable by others: not trusted, replaced by a new 0600 file.
      chmodSync(file, 0o644)
      const widened = yield* serve(box, box.db, idle.baseUrl)
      expect(widened.stdout).toContain(`token: in ${file}, new`)
      expect(readFileSync(file, "utf8").trim()).not.toBe(fresh)
      expect(statSync(file).mode & 0o777).toBe(0o600)
      yield* widened.stop
    }), 90_000)

  it.scopedLive("a goal can never submit or approve goals: it cannot read the token, and http_fetch refuses the server even with --http-allow 127.0.0.1 and the token", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const db = join(box.workspace, ".rx", "rx.db")
      const file = join(box.workspace, ".rx", "rx-server.token")
      // Known once the server listens; the model's answers are written when asked for.
      let url = ""
      let token = ""
      const post = (path: string, body: unknown) => () =>
        call("http_fetch", { url: `${url}${path}`, method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify(body) })
      const model = yield* FakeServer.make([
        call("read_file", { path: ".rx/rx-server.token" }),
        ...(bwrapWorks ? [call("shell", { command: "cat .rx/rx-server.token; cat \"$(find / -name rx-server.token 2>/dev/null | head -1)\"; true" })] : []),
        post("/v1/goals", { goal: "a copy of myself", options: { approval: {} } }),
        () => call("http_fetch", { url: url.replace("127.0.0.1", "localhost") + "/v1/goals", method: "POST", headers: { authorization: `Bearer ${token}` }, body: "{}" }),
        post("/v1/goals/some-goal/approvals/some-call", { approve: true }),
        done("tried")
      ])
      const server = yield* serve(box, db, model.baseUrl, ["--http-allow", "127.0.0.1,localhost", ...(bwrapWorks ? [] : ["--no-shell"])], bwrapWorks ? "bwrap" : "none")
      url = server.url
      // The worst case: the agent knows the token anyway.
      token = readFileSync(file, "utf8").trim()
      const events = yield* runGoal(server.url, token, "submit a copy of yourself")
      const outcomes = events.filter((e) => e["_tag"] === "ToolSucceeded" || e["_tag"] === "ToolFailed")
      expect(outcomes[0]).toMatchObject({ tool: "read_file", _tag: "ToolFailed" })
      const fetches = outcomes.filter((e) => e["tool"] === "http_fetch")
      expect(fetches).toHaveLength(3)
      for (const fetched of fetches) {
        expect(fetched["_tag"]).toBe("ToolFailed")
        expect(JSON.stringify(fetched["error"])).toContain("@rx/tools/EndpointRefused")
      }
      // Nothing the agent saw holds the token.
      expect(JSON.stringify(outcomes)).not.toContain(token)
      const listed = yield* Effect.promise(() => fetch(`${server.url}/v1/goals`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.json() as Promise<{ goals: ReadonlyArray<unknown> }>))
      expect(listed.goals).toHaveLength(1)
      yield* server.stop
    }), 60_000)
})
