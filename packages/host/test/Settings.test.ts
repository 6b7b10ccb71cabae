/**
 * The settings table as Schemas: a config file decodes through `Settings.File`, flags and
 * variables through each setting's text Schema, and what a goal recorded through the same table,
 * each refusal one line naming where the value came from.
 */
import { describe, expect, it } from "@effect/vitest"
import { NodeContext } from "@effect/platform-node"
import { Settings, Setup } from "@rx/host"
import { Settings as Recorded } from "@rx/kernel"
import { Effect, Either, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const file = (json: unknown, place: "workspace" | "user" = "user") => Settings.fromFile("/cfg/rx.json", json, (p) => `/cfg/${p}`, place)

const message = <A>(result: Either.Either<A, Settings.UsageError>) => Either.match(result, { onLeft: (e) => e.message, onRight: () => "accepted" })

describe("the settings table", () => {
  it("a config file decodes through Settings.File: typed values, paths next to the file, one line per refusal", () => {
    const found = Either.getOrThrow(file({ maxIterations: 7, tools: "read_file, shell,read_file", temperature: 0.5, sandbox: "none", instructions: "notes.md", agentsMd: true }))
    expect(Settings.values(found)).toEqual({ maxIterations: 7, tools: ["read_file", "shell"], temperature: 0.5, sandbox: "none", instructions: "/cfg/notes.md", agentsMd: true })
    expect(found.maxIterations?.source).toEqual({ _tag: "file", file: "/cfg/rx.json" })
    expect(message(file({ maxIterations: 1.5 }))).toBe("config file /cfg/rx.json: maxIterations: expected a whole number from 1 up, got 1.5")
    // A file holds JSON's own types: a number or a switch written as text is refused, not read as a flag's text.
    expect(message(file({ maxIterations: "5" }))).toBe("config file /cfg/rx.json: maxIterations: expected a whole number from 1 up, got \"5\"")
    expect(message(file({ agentsMd: "yes" }))).toBe("config file /cfg/rx.json: agentsMd: expected true or false, got \"yes\"")
    expect(message(file({ tools: ["a", 1] }))).toBe("config file /cfg/rx.json: tools: expected an array of names, got [\"a\",1]")
    expect(message(file({ tools: [] }))).toBe("config file /cfg/rx.json: tools: expected names, comma-separated, got none")
    expect(message(file({ model: " " }))).toBe("config file /cfg/rx.json: model: expected a model name, got an empty value")
    expect(message(file({ sandbox: "none" }, "workspace"))).toContain("sandbox cannot be set in a workspace's config file")
    expect(message(file({ maxIteration: 3 }))).toContain("unknown setting \"maxIteration\" (did you mean maxIterations?)")
  })

  it("a misspelt name is answered with the closest, or with the one name it cuts short or runs on past", () => {
    const commands = ["run", "resume", "inspect", "list", "eval", "events", "config"]
    expect(Settings.suggest("lst", commands)).toBe(" (did you mean list?)")
    expect(Settings.suggest("evaluate", commands)).toBe(" (did you mean eval?)")
    expect(Settings.suggest("insp", commands)).toBe(" (did you mean inspect?)")
    expect(Settings.suggest("--max-iter", ["--max-iterations", "--max-failures"])).toBe(" (did you mean --max-iterations?)")
    // More than one name starts so, or nothing is near: no guess.
    expect(Settings.suggest("--max", ["--max-iterations", "--max-failures"])).toBe("")
    expect(Settings.suggest("frobnicate", commands)).toBe("")
  })

  it.effect("flags and variables decode through each setting's text Schema", () =>
    Effect.gen(function*() {
      const decoded = {
        maxIterations: yield* Settings.decodeFlag("max-iterations", Settings.table.maxIterations.text, " 12 "),
        mode: yield* Settings.decodeFlag("mode", Settings.table.mode.text, " json ")
      }
      expect(Settings.values(Settings.fromGiven({ ...decoded, noShell: true }))).toEqual({ maxIterations: 12, mode: "json", noShell: true })
      for (const [key, text, expected] of [
        ["temperature", "1e3", "--temperature: expected a number from 0 to 2, got \"1e3\""],
        ["retries", "100", "--retries: expected a whole number from 0 to 99, got \"100\""],
        ["baseUrl", "ftp://host", "--base-url: expected an http:// or https:// URL such as http://127.0.0.1:11434/v1, got \"ftp://host\""],
        ["deny", " , ", "--deny: expected names, comma-separated, got none"]
      ] as const) {
        const refused = yield* Effect.flip(Settings.decodeFlag(Settings.table[key].flag, Settings.textOf(key), text))
        expect(refused.message).toBe(expected)
      }
    }))

  it.effect("what a goal recorded is read through the same table; a value this rx would not take names the flag that replaces it, or stays when none does", () =>
    Effect.gen(function*() {
      const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "rx-settings-"))
      const recorded = Recorded.Settings.make({ workspace, model: "m", threads: 0, sandbox: "none" })
      const refused = yield* Effect.flip(Setup.resolve({}, Settings.resumeKeys, recorded))
      expect(refused.message).toBe("the goal recorded threads: expected a whole number from 1 to 1024, got 0: give --threads to go on with another value")
      const resolved = yield* Setup.resolve({ threads: 2 }, Settings.resumeKeys, recorded)
      expect(resolved.values).toMatchObject({ threads: 2, model: "m", sandbox: "none", workspace })
      expect(resolved.found.model?.source).toEqual({ _tag: "recorded" })
      // A setting no resume flag replaces stays as recorded: a sub-goal delegated with no tools.
      const none = yield* Setup.resolve({}, Settings.resumeKeys, Recorded.Settings.make({ workspace, model: "m", tools: [] }))
      expect(none.values.tools).toEqual([])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("--compact off (or the config key) turns compaction off in the goal's options; on, or unset, leaves the kernel's default", () =>
    Effect.gen(function*() {
      const off = Settings.values(Settings.fromGiven({ compact: "off" }))
      expect(Setup.runOptions(off)).toEqual({ compact: false })
      expect(Setup.runOptions(Settings.values(Either.getOrThrow(file({ compact: "on" }))))).toEqual({ compact: true })
      expect(Setup.runOptions({})).toEqual({})
      expect(message(file({ compact: false }))).toBe("config file /cfg/rx.json: compact: expected one of on, off, got false")
    }))

  it("every setting a goal records has the type the kernel records it with", () => {
    for (const key of Settings.recordedKeys) {
      const setting = Settings.keys.find((k) => k === key)
      if (setting === undefined || !Settings.table[setting].inFile) continue
      const value = Settings.values(Either.getOrThrow(file({ [key]: sample[key] ?? "x" }))) as Record<string, unknown>
      expect(Schema.is(Recorded.Settings)({ [key]: value[key] }), key).toBe(true)
    }
  })
})

/** A value a config file may give each recorded setting (the rest are text). */
const sample: Readonly<Record<string, unknown>> = {
  sandbox: "bwrap",
  baseUrl: "http://127.0.0.1:1/v1",
  threads: 2,
  context: 4096,
  seed: 7,
  mode: "json",
  temperature: 0.2,
  maxOutputTokens: 100,
  httpAllow: ["10.0.0.0/8"],
  tools: ["read_file"]
}
