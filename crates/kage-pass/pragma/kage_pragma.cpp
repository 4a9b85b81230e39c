// `#pragma kage profile`: clang plugin (libkage_pragma.so, loaded by kage-cc with -fplugin=
// when it builds for the loops tool). It marks what follows the pragma for the Kage pass,
// which versions the marked loop nests (crates/kage-pass/src/nests):
//   - before a `for`, `while` or `do` statement: the tokens of a marker,
//       (void)__builtin_annotation(0, "kage.profile");
//     an `llvm.annotation` call in the block that leads into the loop;
//   - before anything else (a function definition): `__attribute__((annotate("kage.profile")))`,
//     which lists the function in `llvm.global.annotations` (every outermost loop of it).
// `#pragma kage versions [name, ...]`, before a `switch (0)` whose cases are versions of one
// loop nest (crates/kage-pass/src/nests/versions.rs): the switch's condition becomes
//     __builtin_annotation(<condition>, "kage.versions:name,...")
// an `llvm.annotation` call the pass finds and replaces with the runtime's choice.
// A plain compiler ignores both pragmas (a warning under -Wall), so the program builds and
// runs unchanged without Kage: `switch (0)` runs the first version.
#include "clang/Basic/TokenKinds.h"
#include "clang/Frontend/FrontendPluginRegistry.h"
#include "clang/Lex/Preprocessor.h"
#include "clang/Lex/Pragma.h"
#include "clang/Lex/Token.h"

#include <memory>
#include <string>
#include <vector>

namespace {
constexpr const char *Marker = "\"kage.profile\"";

class KageProfilePragma : public clang::PragmaHandler {
public:
  KageProfilePragma() : clang::PragmaHandler("profile") {}

  void HandlePragma(clang::Preprocessor &PP, clang::PragmaIntroducer Introducer,
                    clang::Token &ProfileToken) override {
    clang::Token Tok;
    PP.Lex(Tok);
    if (Tok.isNot(clang::tok::eod)) {
      PP.Diag(Tok.getLocation(), PP.getDiagnostics().getCustomDiagID(
                                     clang::DiagnosticsEngine::Warning,
                                     "extra tokens after '#pragma kage profile' are ignored"));
      while (Tok.isNot(clang::tok::eod)) PP.Lex(Tok);
    }
    // What follows decides the marker: lex it, and put it back behind the marker.
    clang::Token Next;
    PP.Lex(Next);
    PP.EnterToken(Next, /*IsReinject=*/true);
    if (Next.is(clang::tok::eof)) return;
    bool BeforeLoop = Next.isOneOf(clang::tok::kw_for, clang::tok::kw_while, clang::tok::kw_do);
    // Statements that are not loops cannot be profiled (other tokens may start a function
    // definition: what the pragma marks then is for the compiler to check).
    if (Next.isOneOf(clang::tok::kw_return, clang::tok::kw_if, clang::tok::kw_switch,
                     clang::tok::l_brace, clang::tok::kw_goto, clang::tok::kw_break,
                     clang::tok::kw_continue, clang::tok::kw_case, clang::tok::kw_default,
                     clang::tok::semi)) {
      PP.Diag(ProfileToken.getLocation(),
              PP.getDiagnostics().getCustomDiagID(
                  clang::DiagnosticsEngine::Error,
                  "'#pragma kage profile' must come right before a loop (for, while, do) or "
                  "a function definition"));
      return;
    }
    clang::SourceLocation Loc = ProfileToken.getLocation();
    std::vector<clang::Token> Out;
    auto Add = [&](clang::tok::TokenKind Kind) {
      clang::Token T;
      T.startToken();
      T.setKind(Kind);
      T.setLocation(Loc);
      T.setLength(0);
      Out.push_back(T);
    };
    auto AddIdentifier = [&](const char *Name) {
      clang::Token T;
      T.startToken();
      T.setKind(clang::tok::identifier);
      T.setLocation(Loc);
      T.setLength(0);
      T.setIdentifierInfo(PP.getIdentifierInfo(Name));
      Out.push_back(T);
    };
    auto AddString = [&]() {
      clang::Token T;
      T.startToken();
      T.setKind(clang::tok::string_literal);
      T.setLocation(Loc);
      T.setLength(std::char_traits<char>::length(Marker));
      T.setLiteralData(Marker);
      Out.push_back(T);
    };
    auto AddNumber = [&]() {
      clang::Token T;
      T.startToken();
      T.setKind(clang::tok::numeric_constant);
      T.setLocation(Loc);
      T.setLength(1);
      T.setLiteralData("0");
      Out.push_back(T);
    };
    if (BeforeLoop) {
      Add(clang::tok::l_paren);
      Add(clang::tok::kw_void);
      Add(clang::tok::r_paren);
      AddIdentifier("__builtin_annotation");
      Add(clang::tok::l_paren);
      AddNumber();
      Add(clang::tok::comma);
      AddString();
      Add(clang::tok::r_paren);
      Add(clang::tok::semi);
    } else {
      Add(clang::tok::kw___attribute);
      Add(clang::tok::l_paren);
      Add(clang::tok::l_paren);
      AddIdentifier("annotate");
      Add(clang::tok::l_paren);
      AddString();
      Add(clang::tok::r_paren);
      Add(clang::tok::r_paren);
      Add(clang::tok::r_paren);
    }
    auto Tokens = std::make_unique<clang::Token[]>(Out.size());
    std::copy(Out.begin(), Out.end(), Tokens.get());
    PP.EnterTokenStream(std::move(Tokens), Out.size(), /*DisableMacroExpansion=*/true,
                        /*IsReinject=*/false);
  }
};

class KageVersionsPragma : public clang::PragmaHandler {
public:
  KageVersionsPragma() : clang::PragmaHandler("versions") {}

  void HandlePragma(clang::Preprocessor &PP, clang::PragmaIntroducer Introducer,
                    clang::Token &VersionsToken) override {
    auto Error = [&](clang::SourceLocation Loc, const char *Message) {
      PP.Diag(Loc, PP.getDiagnostics().getCustomDiagID(clang::DiagnosticsEngine::Error, "%0"))
          << Message;
    };
    // The versions' names: identifiers, separated by commas, optionally in parentheses.
    std::string Mark = "kage.versions";
    bool First = true;
    clang::Token Tok;
    for (PP.Lex(Tok); Tok.isNot(clang::tok::eod); PP.Lex(Tok)) {
      if (Tok.isOneOf(clang::tok::comma, clang::tok::l_paren, clang::tok::r_paren)) continue;
      if (!Tok.is(clang::tok::identifier)) {
        Error(Tok.getLocation(), "'#pragma kage versions' takes the versions' names: "
                                 "identifiers separated by commas");
        while (Tok.isNot(clang::tok::eod)) PP.Lex(Tok);
        return;
      }
      Mark += First ? ":" : ",";
      Mark += Tok.getIdentifierInfo()->getName().str();
      First = false;
    }
    // `switch ( condition )`: lexed, and put back with the condition wrapped.
    std::vector<clang::Token> Out;
    clang::Token Switch, Open;
    PP.Lex(Switch);
    if (!Switch.is(clang::tok::kw_switch)) {
      Error(VersionsToken.getLocation(),
            "'#pragma kage versions' must come right before a switch (0) whose cases are "
            "the versions");
      PP.EnterToken(Switch, /*IsReinject=*/true);
      return;
    }
    PP.Lex(Open);
    if (!Open.is(clang::tok::l_paren)) {
      PP.EnterToken(Open, /*IsReinject=*/true);
      PP.EnterToken(Switch, /*IsReinject=*/true);
      return; // the parser says what is wrong
    }
    std::vector<clang::Token> Condition;
    int Depth = 1;
    clang::Token Close;
    for (;;) {
      clang::Token T;
      PP.Lex(T);
      if (T.is(clang::tok::eof)) {
        Error(Open.getLocation(), "unterminated switch condition");
        return;
      }
      if (T.is(clang::tok::l_paren)) Depth++;
      if (T.is(clang::tok::r_paren) && --Depth == 0) {
        Close = T;
        break;
      }
      Condition.push_back(T);
    }
    clang::SourceLocation Loc = Open.getLocation();
    auto Make = [&](clang::tok::TokenKind Kind) {
      clang::Token T;
      T.startToken();
      T.setKind(Kind);
      T.setLocation(Loc);
      T.setLength(0);
      return T;
    };
    Out.push_back(Switch);
    Out.push_back(Open);
    clang::Token Builtin = Make(clang::tok::identifier);
    Builtin.setIdentifierInfo(PP.getIdentifierInfo("__builtin_annotation"));
    Out.push_back(Builtin);
    Out.push_back(Make(clang::tok::l_paren));
    Out.insert(Out.end(), Condition.begin(), Condition.end());
    Out.push_back(Make(clang::tok::comma));
    // The literal's spelling must outlive the parse: the preprocessor's allocator keeps it.
    std::string Quoted = "\"" + Mark + "\"";
    char *Spelling = PP.getPreprocessorAllocator().Allocate<char>(Quoted.size() + 1);
    std::copy(Quoted.begin(), Quoted.end(), Spelling);
    Spelling[Quoted.size()] = 0;
    clang::Token String = Make(clang::tok::string_literal);
    String.setLength(Quoted.size());
    String.setLiteralData(Spelling);
    Out.push_back(String);
    Out.push_back(Make(clang::tok::r_paren));
    Out.push_back(Close);
    auto Tokens = std::make_unique<clang::Token[]>(Out.size());
    std::copy(Out.begin(), Out.end(), Tokens.get());
    PP.EnterTokenStream(std::move(Tokens), Out.size(), /*DisableMacroExpansion=*/true,
                        /*IsReinject=*/false);
  }
};

// `#pragma kage ...`: the namespace, with `profile` and `versions`. (A plugin's handlers are
// added to the root namespace under their own name.)
class KagePragmas : public clang::PragmaNamespace {
public:
  KagePragmas() : clang::PragmaNamespace("kage") {
    AddPragma(new KageProfilePragma());
    AddPragma(new KageVersionsPragma());
  }
};

clang::PragmaHandlerRegistry::Add<KagePragmas> Registered("kage",
                                                         "#pragma kage profile, versions");
} // namespace
