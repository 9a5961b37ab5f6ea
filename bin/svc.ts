#!/usr/bin/env bun
import { runCli } from '../src/cli/main.ts';

process.exitCode = await runCli(process.argv.slice(2));
