/**
 * The command that installs node-llama-cpp for rx, per way rx was installed: the exact place rx
 * loads it from, and the CPU build of this platform only.
 */
import { describe, expect, it } from "@effect/vitest"
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Install } from "../src/index.js"

const linux = { execPath: "/usr/local/bin/node", platform: "linux", exists: () => false }

describe("Install", () => {
  it("tells a global install, a --prefix install and a clone apart by where rx's entry file is", () => {
    expect(Install.whereOf("/usr/local/lib/node_modules/@rx/cli/dist/rx.mjs", linux)).toEqual({ _tag: "global", prefix: "/usr/local" })
    expect(Install.whereOf("/home/ann/tools/lib/node_modules/@rx/cli/dist/rx.mjs", linux)).toEqual({ _tag: "prefix", prefix: "/home/ann/tools" })
    const clone = mkdtempSync(join(tmpdir(), "rx-clone-"))
    writeFileSync(join(clone, "pnpm-workspace.yaml"), "packages: [packages/*]\n")
    mkdirSync(join(clone, "packages", "cli", "dist"), { recursive: true })
    expect(Install.whereOf(join(clone, "packages", "cli", "dist", "rx.mjs"), { ...linux, exists: (f) => f === join(clone, "pnpm-workspace.yaml") })).toEqual({ _tag: "workspace", root: clone })
    expect(Install.whereOf("/home/ann/app/node_modules/@rx/cli/dist/rx.mjs", linux)).toEqual({ _tag: "unknown" })
    expect(Install.whereOf("/opt/rx/rx.mjs", linux)).toEqual({ _tag: "unknown" })
    expect(Install.whereOf("C:\\Users\\ann\\AppData\\Roaming\\npm\\node_modules\\@rx\\cli\\dist\\rx.mjs", { execPath: "C:\\Program Files\\nodejs\\node.exe", platform: "win32", exists: () => false }))
      .toEqual({ _tag: "prefix", prefix: "C:\\Users\\ann\\AppData\\Roaming\\npm" })
  })

  it("gives the exact command for each, with the CPU build of the platform and the other builds left out", () => {
    const v = Install.version
    expect(Install.hint({ _tag: "prefix", prefix: "/home/ann/tools" }, "linux", "x64")).toMatch(
      new RegExp(`^npm install --prefix /home/ann/tools/lib --no-save --omit=optional node-llama-cpp@${v} @node-llama-cpp/linux-x64@${v} \\(the CPU build`)
    )
    expect(Install.hint({ _tag: "global", prefix: "/usr/local" }, "linux", "x64")).toMatch(/^npm install --prefix \/usr\/local\/lib --no-save --omit=optional /)
    expect(Install.hint({ _tag: "global", prefix: "/opt/homebrew" }, "darwin", "arm64")).toContain(`@node-llama-cpp/mac-arm64-metal@${v}`)
    expect(Install.hint({ _tag: "prefix", prefix: "/my tools" }, "linux", "x64")).toContain("--prefix '/my tools/lib' ")
    expect(Install.hint({ _tag: "workspace", root: "/src/rx" }, "linux", "x64")).toBe("pnpm install --frozen-lockfile in /src/rx (node-llama-cpp is one of the workspace's dependencies)")
    expect(Install.hint({ _tag: "unknown" }, "linux", "x64")).toMatch(/^npm install --prefix "\$\(npm prefix -g\)\/lib" --no-save --omit=optional /)
    // No prebuilt binary: the plain install, which builds llama.cpp.
    expect(Install.hint({ _tag: "prefix", prefix: "/p" }, "freebsd", "x64")).toMatch(new RegExp(`^npm install -g --prefix /p node-llama-cpp@${v} \\(node-llama-cpp publishes no prebuilt binary`))
  })

  it("names the version rx is tested with, the one the workspace installs, and a platform package it lists", () => {
    // The workspace's node-llama-cpp (a devDependency of this package), as npm publishes it.
    const manifest = JSON.parse(readFileSync(join(realpathSync(join(import.meta.dirname, "..", "node_modules", "node-llama-cpp")), "package.json"), "utf8")) as {
      readonly version: string
      readonly optionalDependencies: Record<string, string>
    }
    expect(manifest.version).toBe(Install.version)
    for (const [platform, arch] of [["linux", "x64"], ["linux", "arm64"], ["darwin", "arm64"], ["darwin", "x64"], ["win32", "x64"]] as const) {
      const name = Install.cpuPackage(platform, arch) ?? ""
      expect(manifest.optionalDependencies[name], name).toBe(Install.version)
    }
  })
})
