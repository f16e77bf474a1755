// Loaded with --import into a child process: the file named by SLOW_DISK_FILE takes a minute to open, as on a disk
// that does not answer, and the child says so on stderr (`slow disk: FILE`) when something starts to open it. A test
// can then signal a process whose start-up is waiting on its disk.
import fs from 'node:fs'
import { syncBuiltinESMExports } from 'node:module'
import { setTimeout } from 'node:timers/promises'

const slow = process.env.SLOW_DISK_FILE
const open = fs.promises.open
fs.promises.open = async (path, ...rest) => {
  if (String(path) === slow) {
    fs.writeSync(2, `slow disk: ${slow}\n`)
    await setTimeout(60_000)
  }
  return open(path, ...rest)
}
// `import { open } from 'node:fs/promises'` reads the patched function.
syncBuiltinESMExports()
