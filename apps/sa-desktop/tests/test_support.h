// Helpers shared by the sa-desktop tests: settings on the shipped model, waiting for the engine.
#pragma once

#include <QString>
#include <functional>

#include "chat_settings.h"

class main_window;

// Greedy settings on the shipped model, 2 CPU threads, the cascade memory.
chat_settings test_settings();

// Wait until the engine has done everything queued so far and the window has received the
// signals it emitted.
void settle(main_window& w);

// Type text into the message box and press Enter, as a user does.
void type_and_send(main_window& w, const QString& text);

// Wait for the turn in progress to end (turn_done); false after timeout_ms.
bool wait_turn(main_window& w, int timeout_ms = 60000);

// The reply of the last turn as the window shows it.
QString last_reply(const main_window& w);

// Resident set size of this process in bytes (Linux /proc; 0 elsewhere).
quint64 rss_bytes();
