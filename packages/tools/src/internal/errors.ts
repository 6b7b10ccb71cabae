/** Turn the typed errors of this package into the kernel's `ToolError`. */
import { Tool } from "@rx/kernel"
import type * as Workspace from "../Workspace.js"

/** File system reasons the model can work around (another path, another file). */
const recoverableReasons = new Set(["NotFound", "PermissionDenied", "AlreadyExists", "BadResource", "Busy", "BadArgument"])

/** Errors carry their fields as `details`, so the log keeps them structured. */
const fields = (error: { readonly _tag: string }): Record<string, unknown> => {
  const details: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(error)) {
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean" || value === null) details[key] = value
  }
  details["_tag"] = error._tag
  return details
}

/** A workspace error as a tool error: recoverable, except a failing file system. */
export const fromWorkspace = (error: Workspace.WorkspaceError): Tool.ToolError =>
  error._tag === "FileSystemFailure" && !recoverableReasons.has(error.reason)
    ? Tool.ToolError.fatal(error.message, fields(error))
    : Tool.ToolError.recoverable(error.message, fields(error))

/** Any tagged error the model can act on. */
export const recoverable = (error: { readonly _tag: string; readonly message: string }): Tool.ToolError =>
  Tool.ToolError.recoverable(error.message, fields(error))

/** Any tagged error that must end the run. */
export const fatal = (error: { readonly _tag: string; readonly message: string }): Tool.ToolError =>
  Tool.ToolError.fatal(error.message, fields(error))

/** Pass tool errors through; turn workspace errors into tool errors. */
export const toToolError = (error: Workspace.WorkspaceError | Tool.ToolError): Tool.ToolError =>
  error._tag === "ToolError" ? error : fromWorkspace(error)
