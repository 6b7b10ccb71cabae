/**
 * rx's commands mounted in another @effect/cli application: an app with its own root command and
 * commands takes `Cli.command` as a subcommand, and `myapp rx ...` runs rx's commands on a real
 * SQLite log, with rx's help, rx's one-line refusals and rx's exit codes, reading its variables
 * through the app's ConfigProvider.
 */
import { Command, Options } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Console, Effect, Layer, Ref } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { format } from "node:util"
import * as Cli from "../src/Cli.js"
import { ExitStatus } from "../src/Commands.js"

const hello = Command.make("hello", { name: Options.text("name") }, ({ name }) => Console.log(`hello ${name}`))
const myapp = Command.make("myapp").pipe(Command.withSubcommands([hello, Cli.command]))
const cli = Command.run(myapp, { name: "myapp", version: "1.0.0" })

/** Run `myapp args...` (or, `alone`, `rx args...` as the binary runs it) in this process: what it printed on stdout and stderr, and the exit status rx set. */
const myappRun = (args: ReadonlyArray<string>, alone = false) =>
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
    yield* (alone ? Cli.main(["node", "rx", ...args]) : cli(["node", "myapp", ...args])).pipe(
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

  it.live("myapp rx --help and myapp rx list --help: rx's own help", () =>
    Effect.gen(function*() {
      const top = (yield* myappRun(["rx", "--help"])).stdout
      expect(top).toContain("rx <command> [flags]      rx <command> --help shows its flags")
      for (const command of ["run", "resume", "approve", "deny", "replay", "inspect", "events", "list", "cancel", "doctor", "config", "serve", "worker", "demo"]) {
        expect(top, command).toMatch(new RegExp(`^ *${command} +\\S`, "m"))
      }
      expect(top).toContain("11  suspended")
      const list = (yield* myappRun(["rx", "list", "--help"])).stdout
      expect(list).toContain((yield* myappRun(["list", "--help"], true)).stdout)
      expect(list).toMatch(/--json +one JSON object per goal/)
      const inspect = (yield* myappRun(["rx", "inspect", "--help"])).stdout
      expect(inspect).toContain("rx inspect [flags] <goal-id>")
      expect(inspect).toMatch(/--step N +show one step in full/)
    }))

  it.live("the same bad lines refused the same way, as one line and exit 1, by rx and by myapp rx", () =>
    Effect.gen(function*() {
      const lines: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
        [["run", "--frobnicate", "hi"], /^rx: rx run has no flag --frobnicate \(rx run --help lists its flags\)$/],
        [["run", "hi", "--max-iteration", "3"], /did you mean --max-iterations\?/],
        [["run", "hi", "--model"], /^rx: --model needs a value: --model NAME$/],
        [["run", "hi", "--model", "--json"], /--model needs a value/],
        [["run", "hi", "--model", "m", "--max-iterations", "0"], /^rx: --max-iterations: expected a whole number from 1 up, got "0"$/],
        [["run", "hi", "--model", "m", "--sandbox", "maybe"], /^rx: --sandbox: expected one of auto, bwrap, none, got "maybe"$/],
        [["serve", "--port", "http"], /^rx: --port: expected a whole number from 0 to 65535, got "http"$/],
        [["inspect", "g", "--step", "0"], /^rx: --step: expected a whole number from 1 up, got "0"$/],
        [["run", "fix", "the", "bug"], /rx run takes one goal: put it in quotes/],
        [["lst"], /^rx: there is no command "lst" \(did you mean list\?\)/],
        [["list", "--json=yes"], /^rx: --json takes no value/],
        [["inspect"], /^rx: rx inspect needs a goal-id/],
        [["--json", "list"], /^rx: --json: flags come after the command/]
      ]
      for (const [args, expected] of lines) {
        const alone = yield* myappRun(args, true)
        const mounted = yield* myappRun(["rx", ...args])
        expect(alone.stderr, args.join(" ")).toMatch(expected)
        expect(alone.stderr.split("\n"), args.join(" ")).toHaveLength(1)
        expect(alone.status, args.join(" ")).toBe(1)
        expect(mounted, args.join(" ")).toEqual(alone)
      }
    }))

  it.live("the app's ConfigProvider is where rx reads its variables: settings, their refusals and where each came from, with no variable of the process", () =>
    Effect.gen(function*() {
      const home = mkdtempSync(join(tmpdir(), "rx-mount-config-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(home, { recursive: true, force: true })))
      const db = join(home, "app.db")
      const provided = (variables: Record<string, string>) =>
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries({ XDG_CONFIG_HOME: home, XDG_STATE_HOME: home, ...variables }))))
      expect(process.env["RX_MAX_ITERATIONS"]).toBeUndefined()
      const shown = yield* myappRun(["rx", "config", "--json"]).pipe(provided({ RX_MAX_ITERATIONS: "7", RX_DB: db, RX_MODEL: "app-model" }))
      expect(shown.status, shown.stderr).toBe(0)
      const { files, settings } = JSON.parse(shown.stdout) as {
        readonly files: ReadonlyArray<{ readonly file: string }>
        readonly settings: Readonly<Record<string, { readonly value: unknown; readonly from: string }>>
      }
      // Values as rx config shows them: text.
      expect(settings["maxIterations"]).toEqual({ value: "7", from: "env RX_MAX_ITERATIONS" })
      expect(settings["model"]).toEqual({ value: "app-model", from: "env RX_MODEL" })
      expect(settings["db"]).toEqual({ value: db, from: "env RX_DB" })
      // The user's config file is where the provider's XDG_CONFIG_HOME puts it.
      expect(files.map((f) => f.file)).toContain(join(home, "rx", "config.json"))
      // A value the app's provider gives is refused as the same variable from the environment is.
      const refused = yield* myappRun(["rx", "run", "hi"]).pipe(provided({ RX_MAX_ITERATIONS: "0", RX_DB: db, RX_MODEL: "m" }))
      expect(refused.stderr).toBe("rx: RX_MAX_ITERATIONS: expected a whole number from 1 up, got \"0\"")
      expect(refused.status).toBe(1)
    }).pipe(Effect.scoped))
})
