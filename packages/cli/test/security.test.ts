/**
 * The shell sandbox's guarantees through the `rx` command: the built bundle, a scripted fake
 * model, real bubblewrap, real git, real processes.
 */
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import * as Limits from "../../tools/src/internal/limits.js"
import { bwrapWorks, jsonLines, rx, sandbox } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

if (!bwrapWorks) console.warn("SKIPPING the CLI sandbox security tests: /usr/bin/bwrap is missing or cannot create namespaces")

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" } })

type Box = ReturnType<typeof sandbox>

/**
 * `rx run --sandbox bwrap --json` with the model's `steps`; `prepare` sets the workspace up and
 * may give the environment and the database path. The tool outputs and failures, in order.
 */
const runSandboxed = (
  steps: ReadonlyArray<FakeServer.Step>,
  prepare: (box: Box) => { readonly env?: Record<string, string>; readonly db?: string } = () => ({})
) =>
  Effect.gen(function*() {
    const server = yield* FakeServer.make(steps)
    const box = sandbox()
    const prepared = prepare(box)
    const db = prepared.db ?? box.db
    const ran = yield* rx(
      ["run", "check the sandbox", "--json", "--db", db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "bwrap"],
      prepared.env ?? {}
    )
    const events = jsonLines(ran.stdout)
    const outputs = events.filter((e) => e["_tag"] === "ToolSucceeded").map((e) => e["output"] as Record<string, unknown>)
    const failures = events.filter((e) => e["_tag"] === "ToolFailed").map((e) => e["error"] as Record<string, unknown>)
    return { box, db, ran, outputs, failures }
  })

/** A program named bwrap that drops the sandbox options, runs the command on the host, and leaves a trace. */
const plantBwrap = (dir: string, trace: string) => {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "bwrap"), `#!/bin/sh\necho ran > '${trace}'\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n`)
  chmodSync(join(dir, "bwrap"), 0o755)
}

describe.skipIf(!bwrapWorks)("rx run: the shell sandbox holds", () => {
  it.scopedLive("a bwrap planted on PATH (the workspace's node_modules/.bin, as under npm run) does not take over", () =>
    Effect.gen(function*() {
      let trace = ""
      const { outputs, ran } = yield* runSandboxed(
        [call("shell", { command: "grep -E '^CapEff:' /proc/self/status" }), done("checked")],
        (box) => {
          trace = join(box.root, "fake-bwrap-ran")
          plantBwrap(join(box.workspace, "node_modules", ".bin"), trace)
          plantBwrap(join(box.root, "bin"), trace)
          return { env: { PATH: `${box.workspace}/node_modules/.bin:${box.root}/bin:${process.env["PATH"] ?? ""}` } }
        }
      )
      expect(ran.code).toBe(0)
      expect(outputs[0]?.["sandbox"]).toBe("bwrap")
      // No capability left: this ran in the real sandbox, not on the host as root.
      expect(String(outputs[0]?.["stdout"])).toMatch(/CapEff:\s+0000000000000000/)
      expect(existsSync(trace)).toBe(false)
    }), 60_000)

  it.scopedLive("a shell step cannot plant a git hook or set core.fsmonitor, and write_file into .git is refused", () =>
    Effect.gen(function*() {
      const { box, failures, outputs, ran } = yield* runSandboxed(
        [
          call("shell", { command: "echo 'touch /tmp/pwned' > .git/hooks/pre-commit; git config core.fsmonitor 'touch /tmp/pwned'; echo config=$?; git status --short" }),
          call("write_file", { path: ".git/hooks/pre-commit", content: "#!/bin/sh\ntouch /tmp/pwned\n" }),
          done("tried")
        ],
        (box) => {
          git(box.workspace, "init", "-q")
          return {}
        }
      )
      expect(ran.code).toBe(0)
      expect(String(outputs[0]?.["stderr"])).toContain("Read-only file system")
      expect(String(outputs[0]?.["stdout"])).toContain("config=255")
      // git itself still works read-only.
      expect(String(outputs[0]?.["stdout"])).toContain("?? hello.txt")
      expect(String(failures[0]?.["message"])).toContain("may read but not change")
      expect(existsSync(join(box.workspace, ".git", "hooks", "pre-commit"))).toBe(false)
      expect(readFileSync(join(box.workspace, ".git", "config"), "utf8")).not.toContain("fsmonitor")
    }), 60_000)

  it.scopedLive("rx's own log inside the workspace can be neither read nor changed by a shell step", () =>
    Effect.gen(function*() {
      const { db, outputs, ran } = yield* runSandboxed(
        [
          call("shell", { command: "head -c 16 rx.db; echo read=$?; echo evil > rx.db; echo hot > rx.db-journal; rm -f rx.db-wal; echo done" }),
          done("tried")
        ],
        (box) => ({ db: join(box.workspace, "rx.db") })
      )
      expect(ran.code).toBe(0)
      expect(String(outputs[0]?.["stdout"])).not.toContain("SQLite format")
      expect(String(outputs[0]?.["stdout"])).toContain("read=1")
      expect(String(outputs[0]?.["stderr"])).toContain("Permission denied")
      // Nothing was made to hold the missing journal: the planted one is the command's, and rx
      // sets it aside before SQLite could roll it back into the log.
      expect(readFileSync(`${db}-journal`, "utf8")).toBe("hot\n")
      expect((yield* rx(["list", "--db", db])).code).toBe(0)
      expect(existsSync(`${db}-journal`)).toBe(false)
      expect(readFileSync(`${db}-journal.refused-by-rx`, "utf8")).toBe("hot\n")
      const log = new Database(db, { readonly: true })
      expect(log.prepare("PRAGMA integrity_check").pluck().get()).toBe("ok")
      log.close()
    }), 60_000)

  it.scopedLive("a huge allocation and too many processes fail under the default limits, which the output records", () =>
    Effect.gen(function*() {
      const { outputs, ran } = yield* runSandboxed([
        // dd asks for its 5 GiB buffer at once: over the 4 GiB memory limit it fails at once.
        call("shell", { command: "dd if=/dev/zero of=/dev/null bs=5G count=1" }),
        // 1100 processes: more than the default 1024.
        call("shell", { command: "for i in $(seq 1100); do sleep 2 & done; echo all-started" }),
        done("limited")
      ])
      expect(ran.code).toBe(0)
      expect(String(outputs[0]?.["stderr"])).toContain("memory exhausted")
      expect(outputs[0]?.["exit_code"]).not.toBe(0)
      // As root the process limit needs a cgroup rx can create (RLIMIT_NPROC does not bind root).
      if (process.getuid?.() !== 0 || Limits.discover() !== undefined) {
        expect(outputs[1]?.["stdout"]).not.toContain("all-started")
        expect(String(outputs[1]?.["stderr"])).toMatch(/Cannot fork|Resource temporarily unavailable/)
        expect((outputs[1]?.["limits"] as Record<string, unknown>)["max_processes"]).toBe(1024)
      }
      expect(outputs[0]?.["limits"]).toMatchObject({ max_memory_bytes: 4 * 1024 ** 3, max_cpu_seconds: 600, max_file_bytes: 1024 ** 3 })
    }), 60_000)
})
