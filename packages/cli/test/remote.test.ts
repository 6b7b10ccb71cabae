/**
 * The commands with `--server URL`, the real binary against a real `rx serve`: a run submitted
 * from one process and followed to its end, the same list, inspect, events and replay as on the
 * log itself, approvals and cancels that the server goes on with, and one clear line for a
 * server that cannot be reached, a wrong token, or a flag that does not apply.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox, serveRx, start, until } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** One line on stderr, exit 1, nothing on stdout. */
const refused = (ran: { code: number | null; stdout: string; stderr: string }, text: string) => {
  expect(ran.code, ran.stderr).toBe(1)
  expect(ran.stdout).toBe("")
  expect(ran.stderr.trim().split("\n")).toHaveLength(1)
  expect(ran.stderr).toContain(text)
}

describe("--server", () => {
  it.scopedLive("rx run --server runs the goal on the server and prints it as a local run; list, inspect, events and replay read the server", () =>
    Effect.gen(function*() {
      const model = yield* FakeServer.make([call("write_file", { path: "out.txt", content: "remote" }), done("written remotely")])
      const box = sandbox()
      const { url } = yield* serveRx(box, model.baseUrl)
      // The token comes from the file rx serve wrote beside the log (--db names it).
      const ran = yield* rx(["run", "--server", url, "--db", box.db, "--max-iterations", "5", "write out.txt"])
      expect(ran.code, ran.stderr).toBe(0)
      const goalId = /goal (\S+) submitted to/.exec(ran.stderr)?.[1] ?? ""
      expect(goalId).not.toBe("")
      expect(ran.stdout).toContain(`goal ${goalId}: write out.txt`)
      expect(ran.stdout).toContain("model fake at")
      expect(ran.stdout).toMatch(/done after 2 iterations \(goal \S+, exit 0\): written remotely/)
      expect(readFileSync(join(box.workspace, "out.txt"), "utf8")).toBe("remote")

      // The same answers through the server as from the log itself.
      for (const command of [["events", goalId], ["inspect", goalId], ["inspect", goalId, "--step", "1"], ["replay", goalId]]) {
        const remote = yield* rx([...command, "--server", url, "--db", box.db])
        const here = yield* rx([...command, "--db", box.db])
        expect(remote.code, remote.stderr).toBe(0)
        expect(remote.stdout).toBe(here.stdout)
      }
      const events = jsonLines((yield* rx(["events", goalId, "--server", url, "--db", box.db])).stdout)
      expect(events.at(0)).toMatchObject({ _tag: "GoalSubmitted", options: { maxIterations: 5 } })
      const listed = yield* rx(["list", "--server", url, "--db", box.db])
      expect(listed.stdout).toMatch(new RegExp(`${goalId}\\s+terminated\\(done\\)\\s+2 it`))
      // RX_SERVER and RX_TOKEN do the same.
      const token = readFileSync(join(box.root, "rx-server.token"), "utf8").trim()
      const byEnv = yield* rx(["list", "--json"], { RX_SERVER: url, RX_TOKEN: token })
      expect(jsonLines(byEnv.stdout)).toMatchObject([{ goalId, status: "terminated", reason: "done" }])
    }), 60_000)

  it.scopedLive("a call that needs approval: run --server exits 11 naming rx approve --server; the approval goes on at the server; cancel over --server", () =>
    Effect.gen(function*() {
      const model = yield* FakeServer.make([call("write_file", { path: "ok.txt", content: "approved" }), done("written"), { kind: "stall" }])
      const box = sandbox()
      const { url } = yield* serveRx(box, model.baseUrl)
      const waiting = yield* rx(["run", "--server", url, "--db", box.db, "--ask", "write_file", "write ok.txt"])
      expect(waiting.code, waiting.stderr).toBe(11)
      const goalId = /goal (\S+) submitted to/.exec(waiting.stderr)?.[1] ?? ""
      expect(waiting.stdout).toContain(`approve: rx approve ${goalId} --server ${url}`)
      expect(waiting.stdout).toContain("then the server goes on with it")
      const approved = yield* rx(["approve", goalId, "--server", url, "--db", box.db, "--by", "Ada Lovelace"])
      expect(approved.code, approved.stderr).toBe(0)
      expect(approved.stdout).toContain(`approved call ${goalId}:1 of goal ${goalId}:\n  write_file, with this input:\n    path: "ok.txt"\n    content: "approved"\nrecorded at ${url}`)
      expect(waiting.stdout).toContain(`waits for approval: write_file, with this input:\n  path: "ok.txt"\n  content: "approved"\n`)
      const followed = jsonLines((yield* rx(["events", goalId, "--follow", "--server", url, "--db", box.db])).stdout)
      expect(followed.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(followed.find((e) => e["_tag"] === "ApprovalDecided")).toMatchObject({ approved: true, by: "Ada Lovelace (via http)" })
      expect(readFileSync(join(box.workspace, "ok.txt"), "utf8")).toBe("approved")
      refused(yield* rx(["approve", goalId, "--server", url, "--db", box.db]), `goal ${goalId} has terminated (done); there is nothing to decide`)

      // A run in another process, cancelled from here: it prints its end, exit 7.
      const running = start(["run", "--server", url, "--db", box.db, "wait for the model"])
      yield* until(() => /goal (\S+) submitted to/.test(running.output().stderr), "the submission")
      const second = /goal (\S+) submitted to/.exec(running.output().stderr)?.[1] ?? ""
      yield* model.waitFor(3)
      const cancelled = yield* rx(["cancel", second, "--server", url, "--db", box.db])
      expect(cancelled.stdout).toContain(`cancel requested: goal ${second}`)
      const ended = yield* Effect.promise(() => running.done)
      expect(ended.code, ended.stderr).toBe(7)
      expect(ended.stdout).toMatch(/cancelled after \d+ iterations? \(goal \S+, exit 7\)/)
    }), 60_000)

  it.scopedLive("one line, exit 1: an unreachable server, a wrong or missing token, an unknown goal, flags that do not apply", () =>
    Effect.gen(function*() {
      const model = yield* FakeServer.make([])
      const box = sandbox()
      const { url } = yield* serveRx(box, model.baseUrl)
      refused(yield* rx(["list", "--server", "http://127.0.0.1:1"], { RX_TOKEN: "0123456789abcdef0123" }), "cannot reach the rx server at http://127.0.0.1:1")
      refused(yield* rx(["list", "--server", url], { RX_TOKEN: "0123456789abcdef-wrong" }), `the server at ${url} refused the token`)
      // No RX_TOKEN, and no token file beside the default log.
      refused(yield* rx(["list", "--server", url]), "there is no token file at")
      // A server elsewhere never gets the local token file.
      refused(yield* rx(["list", "--server", "http://rx.example:7433", "--db", box.db]), "set RX_TOKEN to the token of the server at http://rx.example:7433")
      refused(yield* rx(["list", "--server", "ftp://x"]), "--server: expected an http:// or https:// URL")
      refused(yield* rx(["inspect", "nope", "--server", url, "--db", box.db]), `no goal with id nope at ${url}`)
      refused(yield* rx(["run", "--server", url, "--db", box.db, "--model", "other", "x"]), "--model does not apply with --server")
      refused(yield* rx(["run", "--server", url, "--db", box.db, "--sandbox", "none", "x"]), "--sandbox does not apply with --server")
      refused(yield* rx(["resume", "g", "--server", url, "--db", box.db, "--max-iterations", "9"]), "--max-iterations does not apply with --server")
      refused(yield* rx(["events", "g", "--follow", "--wait", "--server", url, "--db", box.db]), "--wait does not apply with --server")
      refused(yield* rx(["run", "--server", url, "--db", box.db, "--workspace", "../out", "x"]), "workspace")
      expect(model.received).toHaveLength(0)
    }), 60_000)

  it.scopedLive("rx serve: an address other machines reach needs --allow-remote (refused, nothing created); a log folder that does not exist yet is made, token beside it", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const fresh = join(box.root, "fresh", "rx.db")
      refused(
        yield* rx(["serve", "--host", "0.0.0.0", "--port", "0", "--db", fresh, "--workspace", box.workspace, "--model", "m"]),
        "host 0.0.0.0 lets other machines reach the server"
      )
      expect(existsSync(join(box.root, "fresh"))).toBe(false)
      const child = start(["serve", "--host", "0.0.0.0", "--allow-remote", "--port", "0", "--db", fresh, "--workspace", box.workspace, "--model", "m"])
      yield* until(() => /listening on/.test(child.output().stdout) || child.exitCode !== null, "rx serve to listen")
      expect(child.output().stdout, child.output().stderr).toMatch(/listening on 0\.0\.0\.0 port \d+ \(http:\/\/127\.0\.0\.1:\d+ from this machine\)/)
      expect(statSync(join(box.root, "fresh", "rx-server.token")).mode & 0o777).toBe(0o600)
      child.kill("SIGTERM")
      expect((yield* Effect.promise(() => child.done)).code).toBe(0)
    }), 60_000)
})
