/**
 * @rx/tools: the built-in tools of rx (files, shell, HTTP), confined to a workspace, and the
 * Layer that registers them with the kernel's `ToolRegistry`.
 */
export * as Builtins from "./Builtins.js"
export * as Config from "./Config.js"
export * as Confinement from "./Confinement.js"
export * as Delegate from "./Delegate.js"
export * as EditFile from "./EditFile.js"
export * as FindFiles from "./FindFiles.js"
export * as HttpFetch from "./HttpFetch.js"
export * as ListDir from "./ListDir.js"
export * as ProcessTree from "./ProcessTree.js"
export * as ReadFile from "./ReadFile.js"
export * as Sandbox from "./Sandbox.js"
export * as SearchText from "./SearchText.js"
export * as Shell from "./Shell.js"
export * as Toolbox from "./Toolbox.js"
export * as Workspace from "./Workspace.js"
export * as WriteFile from "./WriteFile.js"
