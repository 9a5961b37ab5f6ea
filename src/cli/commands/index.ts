import type { Command } from '../command.ts';
import { membersAdd, projectsCreate, tenantsCreate } from './tenancy.ts';
import { apiKeysCreate, apiKeysDelete, apiKeysDisable, apiKeysEnable, apiKeysList } from './api-keys.ts';

/** Every CLI command; each capability adds its own here. */
export const COMMANDS: Command[] = [tenantsCreate, projectsCreate, membersAdd];
COMMANDS.push(apiKeysCreate, apiKeysList, apiKeysDisable, apiKeysEnable, apiKeysDelete);
