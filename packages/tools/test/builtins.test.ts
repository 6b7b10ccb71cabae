import { describe, expect, it } from "@effect/vitest"
import { Tool, ToolRegistry } from "@rx/kernel"
import { Context, Effect, Either, Fiber, Layer, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Builtins, Config, Workspace } from "../src/index.js"
import { failed, invoke, makeDirs, ok, withTools } from "./helpers.js"
import { alive } from "./shellSuite.js"

describe("Builtins", () => {
  it.effect("registers exactly the built-in tools, with honest idempotence", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const specs = yield* withTools({ workspace: ws, sandbox: "none" }, Effect.map(ToolRegistry.ToolRegistry, (r) => r.specs))
      expect(specs.map((s) => [s.name, s.idempotent])).toEqual([
        ["read_file", true],
        ["write_file", false],
        ["edit_file", false],
        ["list_dir", true],
        ["find_files", true],
        ["search_text", true],
        ["shell", false],
        ["http_fetch", false]
      ])
      const properties = (name: string) =>
        Object.keys((specs.find((s) => s.name === name)?.parameters["properties"] ?? {}) as object).sort()
      expect(properties("read_file")).toEqual(["limit", "offset", "path"])
      expect(properties("write_file")).toEqual(["allow_placeholder", "allow_shrink", "content", "expected_sha256", "path"])
      expect(properties("edit_file")).toEqual(["allow_placeholder", "expected_sha256", "new_text", "old_text", "path", "replace_all"])
      expect(properties("list_dir")).toEqual(["depth", "path"])
      expect(properties("find_files")).toEqual(["path", "pattern"])
      expect(properties("search_text")).toEqual(["path", "pattern"])
      expect(properties("shell")).toEqual(["command", "timeout_ms"])
      expect(properties("http_fetch")).toEqual(["body", "headers", "method", "url"])
      cleanup()
    }))

  it.effect("rejects invalid input and unknown arguments before running", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const config = { workspace: ws, sandbox: "none" as const }
      expect(failed(yield* withTools(config, invoke("read_file", { path: "a", offset: 0 }))).kind).toBe("recoverable")
      expect(failed(yield* withTools(config, invoke("write_file", { path: "a", content: "x", force: true }))).message).toContain("force")
      expect(failed(yield* withTools(config, invoke("write_file", { path: "a", content: "x", expected_sha256: "abc" }))).kind).toBe("recoverable")
      expect(fs.existsSync(path.join(ws, "a"))).toBe(false)
      cleanup()
    }))

  it.effect("adds a user's tool beside the built-ins, with access to the workspace", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      fs.writeFileSync(path.join(ws, "a.txt"), "abc")
      const wordCount = Tool.make({
        name: "count_bytes",
        description: "Bytes in a workspace file.",
        input: Schema.Struct({ path: Schema.String }),
        output: Schema.Struct({ bytes: Schema.Int }),
        idempotent: true,
        execute: ({ path: p }) =>
          Effect.scoped(Effect.flatMap(Workspace.Workspace, (w) => w.open(p))).pipe(
            Effect.map((opened) => ({ bytes: Number(opened.info.size) })),
            Effect.mapError((error) => Tool.ToolError.recoverable(error.message))
          )
      })
      const registry = Builtins.layerWith({ workspace: ws, sandbox: "none" }, [wordCount])
      const out = yield* invoke("count_bytes", { path: "a.txt" }).pipe(Effect.provide(registry))
      expect(ok(out)).toEqual({ bytes: 3 })
      const specs = yield* Effect.map(ToolRegistry.ToolRegistry, (r) => r.specs.map((s) => s.name)).pipe(Effect.provide(registry))
      expect(specs).toContain("read_file")
      expect(specs).toContain("count_bytes")
      const clash = yield* Effect.either(Layer.build(Builtins.layerWith({ workspace: ws, sandbox: "none" }, [{ ...wordCount, spec: { ...wordCount.spec, name: "done" } }])).pipe(Effect.scoped))
      expect(Either.isLeft(clash)).toBe(true)
      cleanup()
    }))

  it.effect("an invalid config or workspace fails to build, naming the problem", () =>
    Effect.gen(function*() {
      const missing = yield* Effect.either(Layer.build(Builtins.layer({ workspace: "/nonexistent/rx-ws" })).pipe(Effect.scoped))
      expect(Either.isLeft(missing) && missing.left._tag).toBe("@rx/tools/InvalidWorkspace")
      const bad = yield* Effect.either(Layer.build(Builtins.layer({ workspace: ".", sandbox: "docker" as "none" })).pipe(Effect.scoped))
      expect(Either.isLeft(bad) && bad.left._tag).toBe("@rx/tools/InvalidConfig")
      // The decoded config encodes to JSON for a goal's metadata.
      const decoded = yield* Config.decode({ workspace: "/w", sandbox: "none" })
      expect(JSON.parse(JSON.stringify(Config.encode(decoded)))).toMatchObject({ workspace: "/w", sandbox: "none", shellGraceMs: 2000 })
    }))

  it.live("interrupting a shell call kills its process tree", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const tag = String(100_000 + Math.floor(Math.random() * 899_999))
      const fiber = yield* Effect.fork(withTools({ workspace: ws, sandbox: "none" }, invoke("shell", { command: `setsid sleep 40.${tag} & sleep 41.${tag}` })))
      for (let i = 0; i < 50 && alive(tag).length < 2; i++) yield* Effect.sleep("50 millis")
      expect(alive(tag).length).toBeGreaterThan(0)
      yield* Fiber.interrupt(fiber)
      for (let i = 0; i < 50 && alive(tag).length > 0; i++) yield* Effect.sleep("100 millis")
      expect(alive(tag)).toEqual([])
      cleanup()
    }))
})

describe("Builtins: the tools offered", () => {
  const names = (config: Config.Input) =>
    Effect.gen(function*() {
      const context = yield* Layer.build(Builtins.layer(config))
      const specs = Context.get(context, ToolRegistry.ToolRegistry).specs.map((s) => s.name)
      return { specs, availability: Context.get(context, Builtins.Availability) }
    }).pipe(Effect.scoped)

  it.live("mode auto without a usable bubblewrap leaves shell out and says why; none offers it; bwrap still fails", () =>
    Effect.gen(function*() {
      const { base, cleanup, ws } = makeDirs()
      // Missing.
      const missing = yield* names({ workspace: ws, sandbox: "auto", bwrapPath: "/nonexistent/bwrap" })
      expect(missing.specs).toEqual(["read_file", "write_file", "edit_file", "list_dir", "find_files", "search_text", "http_fetch"])
      expect(missing.availability.tools.map((t) => t.spec.name)).toEqual(missing.specs)
      expect(missing.availability.unavailable.map((u) => u.tool)).toEqual(["shell"])
      const reason = missing.availability.unavailable[0]?.reason ?? ""
      expect(reason).toContain("bubblewrap")
      expect(reason).toContain("/nonexistent/bwrap does not exist")
      expect(reason).toContain("sandbox mode `none`")
      // Untrusted: a bwrap in a folder others may write is refused the same way, never run.
      const open = path.join(base, "open")
      fs.mkdirSync(open)
      fs.writeFileSync(path.join(open, "bwrap"), `#!/bin/sh\ntouch '${path.join(base, "ran")}'\n`, { mode: 0o755 })
      fs.chmodSync(open, 0o777)
      const untrusted = yield* names({ workspace: ws, sandbox: "auto", bwrapPath: path.join(open, "bwrap") })
      expect(untrusted.specs).not.toContain("shell")
      expect(untrusted.availability.unavailable[0]?.reason).toMatch(/bubblewrap.*writable by its group or by others/)
      expect(fs.existsSync(path.join(base, "ran"))).toBe(false)
      // The model is told there is no such tool, as for any unknown name.
      const call = failed(yield* withTools({ workspace: ws, sandbox: "auto", bwrapPath: "/nonexistent/bwrap" }, invoke("shell", { command: "echo hi" })))
      expect(call.message).toContain(`there is no tool named "shell"`)
      // Asked before building: the same answer.
      expect(yield* Builtins.unavailable({ workspace: ws, sandbox: "auto", bwrapPath: "/nonexistent/bwrap" })).toEqual(missing.availability.unavailable)
      // Mode none offers shell, and nothing is missing.
      const none = yield* names({ workspace: ws, sandbox: "none", bwrapPath: "/nonexistent/bwrap" })
      expect(none.specs).toContain("shell")
      expect(none.availability.unavailable).toEqual([])
      expect(yield* Builtins.unavailable({ workspace: ws, sandbox: "none" })).toEqual([])
      // Mode bwrap requires it: building fails.
      const required = yield* Effect.flip(names({ workspace: ws, sandbox: "bwrap", bwrapPath: "/nonexistent/bwrap" }))
      expect(required._tag).toBe("@rx/tools/SandboxUnavailable")
      cleanup()
    }))

  it.live("layerWith leaves shell out too, and refuses an extra tool named like a built-in that was left out", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const config = { workspace: ws, sandbox: "auto" as const, bwrapPath: "/nonexistent/bwrap" }
      const mine = Tool.make({
        name: "mine",
        description: "Nothing.",
        input: Schema.Struct({}),
        output: Schema.Struct({}),
        idempotent: true,
        execute: () => Effect.succeed({})
      })
      const specs = yield* Effect.map(ToolRegistry.ToolRegistry, (r) => r.specs.map((s) => s.name)).pipe(
        Effect.provide(Builtins.layerWith(config, [mine]))
      )
      expect(specs).toEqual(["read_file", "write_file", "edit_file", "list_dir", "find_files", "search_text", "http_fetch", "mine"])
      const impostor = yield* Effect.flip(Layer.build(Builtins.layerWith(config, [{ ...mine, spec: { ...mine.spec, name: "shell" } }])).pipe(Effect.scoped))
      expect(impostor._tag).toBe("@rx/kernel/InvalidToolset")
      expect(impostor.message).toContain(`"shell" is the name of a built-in tool`)
      cleanup()
    }))

  it.live("the config's tools chooses the built-ins offered, in their usual order; an unknown name is an InvalidConfig listing the valid ones", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      expect(Builtins.tools.map((t) => t.spec.name)).toEqual(Config.toolNames)
      const chosen = yield* names({ workspace: ws, sandbox: "none", tools: ["shell", "read_file"] })
      expect(chosen.specs).toEqual(["read_file", "shell"])
      expect(chosen.availability.unavailable).toEqual([])
      expect((yield* names({ workspace: ws, sandbox: "none", tools: [] })).specs).toEqual([])
      // A chosen shell that cannot run is left out like any other.
      const noSandbox = yield* names({ workspace: ws, sandbox: "auto", bwrapPath: "/nonexistent/bwrap", tools: ["read_file", "shell"] })
      expect(noSandbox.specs).toEqual(["read_file"])
      expect(noSandbox.availability.unavailable.map((u) => u.tool)).toEqual(["shell"])
      // Not chosen: not reported as missing either.
      const unchosen = yield* names({ workspace: ws, sandbox: "auto", bwrapPath: "/nonexistent/bwrap", tools: ["read_file"] })
      expect(unchosen.availability.unavailable).toEqual([])
      const unknown = yield* Effect.flip(Config.decode({ workspace: ws, tools: ["read_file", "shel"] }))
      expect(unknown._tag).toBe("@rx/tools/InvalidConfig")
      expect(unknown.message).toContain(`there is no built-in tool named "shel"`)
      expect(unknown.message).toContain(Config.toolNames.join(", "))
      const failure = yield* Effect.flip(names({ workspace: ws, tools: ["done"] }))
      expect(failure._tag).toBe("@rx/tools/InvalidConfig")
      // Recorded with the config, so a resumed goal offers the same tools.
      const decoded = yield* Config.decode({ workspace: ws, tools: ["list_dir"] })
      expect(Config.encode(decoded).tools).toEqual(["list_dir"])
      cleanup()
    }))
})
