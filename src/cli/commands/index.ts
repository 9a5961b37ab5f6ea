import type { Command } from '../command.ts';
import { membersAdd, projectsCreate, tenantsCreate } from './tenancy.ts';

/** Every CLI command; each capability adds its own here. */
export const COMMANDS: Command[] = [tenantsCreate, projectsCreate, membersAdd];
