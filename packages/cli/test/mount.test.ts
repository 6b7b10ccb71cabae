/**
 * rx's commands mounted in another @effect/cli application: an app with its own root command and
 * commands takes `Cli.command` as a subcommand, and `myapp rx ...` runs rx's commands on a real
 * SQLite log, with @effect/cli's help for them.
 */
import { Command, Options } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Layer, Ref } from "effect"
import { rmSync } from "node:fs"
import { format } from "node:util"
import * as Cli from "../src/Cli.js"
import { ExitStatus } from "../src/Commands.js"

const hello = Command.make("hello", { name: Options.text("name") }, ({ name }) => Console.log(`hello ${name}`))
const myapp = Command.make("myapp").pipe(Command.withSubcommands([hello, Cli.command]))
const cli = Command.run(myapp, { name: "myapp", version: "1.0.0" })

/** Run `myapp args...` in this process: what it printed on stdout and stderr, and the exit status rx set. */
const myappRun = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const err: Array<string> = []
    const status = yield* Ref.make(0)
    const console = yield* Console.consoleWith((base) =>
      Effect.succeed<Console.Console>({
        ...base,
        log: (...line) => Effect.sync(() => void out.push(format(...line))),
        error: (...line) => Effect.sync(() => void err.push(format(...line)))
      })
    )
    yield* cli(["node", "myapp", ...args]).pipe(
      Effect.withConsole(console),
      Effect.provide(Layer.merge(NodeContext.layer, Layer.succeed(ExitStatus, status)))
    )
    return { stdout: out.join("\n"), stderr: err.join("\n"), status: yield* Ref.get(status) }
  })

describe("rx mounted in another @effect/cli app", () => {
  it.live("myapp rx demo, list, inspect and replay on a real SQLite log; the app's own command still runs", () =>
    Effect.gen(function*() {
      expect((yield* myappRun(["hello", "--name", "you"])).stdout).toBe("hello you")
      const demo = yield* myappRun(["rx", "demo", "--keep"])
      expect(demo.status, demo.stderr).toBe(0)
      const db = /database +(\S+)/.exec(demo.stdout)?.[1] ?? ""
      expect(db).toMatch(/rx\.db$/)
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(db.replace(/\/rx\.db$/, ""), { recursive: true, force: true })))
      const listed = yield* myappRun(["rx", "list", "--db", db, "--json"])
      const goals = listed.stdout.split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)
      expect(goals).toHaveLength(1)
      expect(goals[0]).toMatchObject({ status: "terminated", reason: "done" })
      const goalId = String(goals[0]?.["goalId"])
      const inspected = yield* myappRun(["rx", "inspect", goalId, "--db", db, "--step", "1", "--json"])
      expect(JSON.parse(inspected.stdout)).toMatchObject({ goalId })
      const replayed = yield* myappRun(["rx", "replay", goalId, "--db", db, "--json"])
      expect(replayed.status, replayed.stdout).toBe(0)
      expect(JSON.parse(replayed.stdout)).toMatchObject({ identical: true })
    }).pipe(Effect.scoped))

  it.live("myapp rx --help and myapp rx list --help: @effect/cli's help of rx's commands, each flag described", () =>
    Effect.gen(function*() {
      const top = (yield* myappRun(["rx", "--help"])).stdout
      for (const command of ["run", "resume", "approve", "deny", "replay", "inspect", "events", "list", "cancel", "doctor", "config", "serve", "worker", "demo"]) {
        expect(top, command).toMatch(new RegExp(`^ *- ${command} `, "m"))
      }
      expect(top).toContain("the goals in the database, newest first")
      const list = (yield* myappRun(["rx", "list", "--help"])).stdout
      expect(list).toContain("--json")
      expect(list).toContain("one JSON object per goal")
      expect(list).toContain("env RX_DB")
      const inspect = (yield* myappRun(["rx", "inspect", "--help"])).stdout
      expect(inspect).toContain("<goal-id>")
      expect(inspect).toContain("the goal's id, as rx list shows it")
    }))
})
