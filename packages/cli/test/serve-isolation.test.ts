/**
 * Goals of one `rx serve` attacking each other, run for real: the built binary, real bubblewrap,
 * two goals at once whose workspaces contain one another, and a model on 127.0.0.1 that holds each
 * goal's answers until the other goal has reached the step the attack needs.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { bwrapWorks, jsonLines, sandbox, start, until } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** The text of a model request's messages, and how many tool results it carries. */
const read = (body: unknown) => {
  const messages = typeof body === "object" && body !== null && "messages" in body && Array.isArray(body.messages) ? body.messages : []
  const text = JSON.stringify(messages)
  const results = messages.filter((m: unknown) => typeof m === "object" && m !== null && "role" in m && m.role === "tool").length
  return { text, results }
}

/**
 * A Chat Completions server whose answer may wait: `answer` gets a request's body and returns
 * the reply's JSON body, or a promise of it. Closed with the scope.
 */
const scriptedModel = (answer: (body: unknown) => unknown) =>
  Effect.acquireRelease(
    Effect.async<{ readonly baseUrl: string; readonly server: Http.Server }>((resume) => {
      const server = Http.createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          void Promise.resolve(answer(JSON.parse(Buffer.concat(chunks).toString("utf8")))).then((reply) => {
            res.writeHead(200, { "content-type": "application/json" })
            res.end(JSON.stringify(reply))
          })
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, server })))
    }),
    ({ server }) => Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
  )

/** A promise resolved by `open()`. */
const gate = () => {
  let open = () => {}
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { open, opened }
}

const body = (reply: FakeServer.Reply) => (reply.kind === "json" ? reply.body : null)

describe.skipIf(!bwrapWorks)("rx serve: goals whose workspaces contain one another", () => {
  it.scopedLive("goal A swaps goal B's folder for a link to / between two of B's shell calls, both running: B's next call is a recorded failure, nothing of the host is mounted", () =>
    Effect.gen(function*() {
      const box = sandbox()
      mkdirSync(join(box.workspace, "b"))
      const marker = `rx-escape-${process.pid}-${Date.now()}`
      const bDidOne = gate()
      const aSwapped = gate()
      const model = yield* scriptedModel(async (request) => {
        const { results, text } = read(request)
        if (text.includes("goal A")) {
          if (results === 0) {
            await bDidOne.opened
            return body(call("shell", { command: "mv b b.old && ln -s / b && echo swapped" }))
          }
          aSwapped.open()
          return body(done("swapped"))
        }
        if (results === 0) return body(call("shell", { command: "echo one > one.txt" }))
        if (results === 1) {
          bDidOne.open()
          await aSwapped.opened
          return body(call("shell", { command: `touch /${marker} ${marker}; cat /etc/hostname > stolen; echo ran` }))
        }
        return body(done("finished"))
      })
      const server = start(["serve", "--port", "0", "--db", box.db, "--workspace", box.workspace, "--base-url", model.baseUrl, "--model", "fake", "--sandbox", "bwrap", "--concurrency", "2"])
      yield* Effect.addFinalizer(() => Effect.promise(() => (server.kill("SIGTERM"), server.done)))
      yield* until(() => /listening on (http:\/\/\S+)/.test(server.output().stdout) || server.exitCode !== null, "rx serve to listen", 120_000)
      const url = /listening on (http:\/\/\S+)/.exec(server.output().stdout)?.[1] ?? ""
      expect(url, server.output().stderr).not.toBe("")
      const token = readFileSync(join(box.root, "rx-server.token"), "utf8").trim()
      const post = (goal: unknown) =>
        Effect.promise(async () => {
          const response = await fetch(`${url}/v1/goals`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify(goal) })
          return ((await response.json()) as { goalId: string }).goalId
        })
      const follow = (goalId: string) =>
        Effect.promise(async () => jsonLines(await (await fetch(`${url}/v1/goals/${goalId}/events`, { headers: { authorization: `Bearer ${token}` } })).text()))
      const a = yield* post({ goal: "goal A: work on the whole root" })
      const b = yield* post({ goal: "goal B: work in b", workspace: "b" })
      const [aEvents, bEvents] = yield* Effect.all([follow(a), follow(b)], { concurrency: 2 })
      expect(aEvents.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(aEvents.find((e) => e["_tag"] === "ToolSucceeded")?.["output"]).toMatchObject({ stdout: "swapped\n" })
      // B's second call: refused, recorded, and the goal ends on it.
      const failed = bEvents.filter((e) => e["_tag"] === "ToolFailed")
      expect(failed).toHaveLength(1)
      expect(failed[0]?.["error"]).toMatchObject({ kind: "fatal" })
      expect(String((failed[0]?.["error"] as Record<string, unknown>)["message"])).toContain("is no longer the folder this goal started in (its path is now a symbolic link)")
      expect(bEvents.at(-1)).toMatchObject({ _tag: "Terminated", reason: "fatal_error" })
      expect(existsSync(`/${marker}`)).toBe(false)
      expect(existsSync("/stolen")).toBe(false)
      expect(readdirSync(join(box.workspace, "b.old"))).toEqual(["one.txt"])
    }), 240_000)
})
