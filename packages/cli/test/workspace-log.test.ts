/**
 * A log placed inside the workspace anyway: the CLI gives its files to the tools as hidden
 * paths, so no file tool and no sandboxed shell command can read, rewrite or remove it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

describe("a log inside the workspace", () => {
  it.scopedLive("is hidden from the file tools: read_file, write_file and list_dir never reach it or its siblings", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const db = join(box.workspace, ".rx", "rx.db")
      const server = yield* FakeServer.make([
        call("read_file", { path: ".rx/rx.db" }),
        call("write_file", { path: ".rx/rx.db-wal", content: "overwritten" }),
        call("list_dir", { path: ".rx" }),
        done("tried")
      ])
      const ran = yield* rx(["run", "tamper with the log", "--json", "--db", db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none"])
      expect(ran.code).toBe(0)
      const outcomes = jsonLines(ran.stdout).filter((e) => e["_tag"] === "ToolSucceeded" || e["_tag"] === "ToolFailed")
      expect(outcomes.map((e) => [e["tool"], e["_tag"]])).toEqual([
        ["read_file", "ToolFailed"],
        ["write_file", "ToolFailed"],
        ["list_dir", "ToolSucceeded"]
      ])
      expect(JSON.stringify(outcomes[2]?.["output"])).not.toContain("rx.db")
      // The log is whole, and no -wal was written by the agent.
      expect((yield* rx(["doctor", "--db", db])).code).toBe(0)
      expect((yield* rx(["replay", String(jsonLines(ran.stdout)[0]?.["goalId"]), "--db", db])).code).toBe(0)
    }))

  it.scopedLive.skipIf(!existsSync("/usr/bin/bwrap"))("is out of reach in the shell sandbox: not readable, and writes or removals do not reach it", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const db = join(box.workspace, ".rx", "rx.db")
      const server = yield* FakeServer.make([
        call("shell", { command: "head -c 16 .rx/rx.db; echo x >> .rx/rx.db; echo x > .rx/rx.db-wal; rm -f .rx/rx.db-shm .rx/rx.db; true" }),
        done("tried")
      ])
      const ran = yield* rx(["run", "tamper with the log", "--json", "--db", db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "bwrap"])
      expect(ran.code).toBe(0)
      const outcome = jsonLines(ran.stdout).find((e) => e["_tag"] === "ToolSucceeded" || e["_tag"] === "ToolFailed")
      expect(outcome?.["tool"]).toBe("shell")
      expect(JSON.stringify(outcome)).not.toContain("SQLite format 3")
      expect((yield* rx(["doctor", "--db", db])).code).toBe(0)
      expect((yield* rx(["replay", String(jsonLines(ran.stdout)[0]?.["goalId"]), "--db", db])).code).toBe(0)
    }))
})

