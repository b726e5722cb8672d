// The registry's rejections of broken plugins, each with its code and message.
#include "loader/registry.h"

#include <gtest/gtest.h>

#include "core/base/error.h"
#include "test_paths.h"

using ddph::loader::Registry;
using ddph_test::fixture_dir;

namespace {

// Loads family from the one fixture case dir; returns the error (code, text).
ddph::Error load_error(const std::string& case_dir, const std::string& family) {
  Registry registry({fixture_dir(case_dir)});
  try {
    registry.load(family);
  } catch (const ddph::Error& e) {
    return e;
  }
  return ddph::Error(DDPH_OK, "loaded");
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

}  // namespace

TEST(Registry, LoadsAGoodPluginOnce) {
  Registry registry({fixture_dir("good")});
  const auto& p = registry.load("fixture_sum");
  EXPECT_EQ(p.family(), "fixture_sum");
  EXPECT_EQ(p.file(), fixture_dir("good") + "/libddph_fixture_sum.so");
  EXPECT_NE(p.find_hook("sum"), nullptr);
  EXPECT_EQ(p.find_hook("nope"), nullptr);
  EXPECT_EQ(p.hook_names(), "sum, scale");
  EXPECT_EQ(&registry.load("fixture_sum"), &p);
  EXPECT_NE(registry.load("comm_fake").find_comm("fake"), nullptr);
}

TEST(Registry, MissingPluginListsEverySearchedDirectory) {
  ddph_test::ScopedEnv env("DDPH_PLUGIN_PATH", "/nonexistent/a:/nonexistent/b");
  Registry registry({fixture_dir("good"), "/nonexistent/yaml"});
  try {
    registry.load("no_such_family");
    FAIL() << "loaded a missing plugin";
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_NOT_FOUND);
    EXPECT_HAS(e.what(), "libddph_no_such_family.so");
    EXPECT_HAS(e.what(), fixture_dir("good"));
    EXPECT_HAS(e.what(), "/nonexistent/yaml");
    EXPECT_HAS(e.what(), "/nonexistent/a");
    EXPECT_HAS(e.what(), "/nonexistent/b");
    EXPECT_HAS(e.what(), DDPH_PLUGIN_INSTALL_DIR_FOR_TEST);
  }
}

TEST(Registry, SearchOrderYamlPathBeatsEnv) {
  {
    ddph_test::ScopedEnv env("DDPH_PLUGIN_PATH", fixture_dir("shadow"));
    Registry registry({fixture_dir("good")});
    EXPECT_STREQ(registry.load("fixture_sum").desc().version, "0.1-fixture");
    EXPECT_EQ(registry.dirs()[0], fixture_dir("good"));
    EXPECT_EQ(registry.dirs()[1], fixture_dir("shadow"));
  }
  {
    ddph_test::ScopedEnv env("DDPH_PLUGIN_PATH", fixture_dir("good") + ":" + fixture_dir("shadow"));
    Registry registry({fixture_dir("shadow")});
    EXPECT_STREQ(registry.load("fixture_sum").desc().version, "shadow");
  }
  {
    // Without a YAML path, the environment comes first.
    ddph_test::ScopedEnv env("DDPH_PLUGIN_PATH", fixture_dir("shadow"));
    Registry registry;
    EXPECT_STREQ(registry.load("fixture_sum").desc().version, "shadow");
  }
}

TEST(Registry, MissingSymbol) {
  ddph::Error e = load_error("nosym", "fixture_nosym");
  EXPECT_EQ(e.code(), DDPH_NOT_FOUND);
  EXPECT_HAS(e.what(), "libddph_fixture_nosym.so");
  EXPECT_HAS(e.what(), "ddph_plugin_entry");
}

TEST(Registry, NotASharedObjectIncludesDlerror) {
  ddph::Error e = load_error("garbage", "fixture_garbage");
  EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
  EXPECT_HAS(e.what(), "cannot load plugin");
  EXPECT_HAS(e.what(), "libddph_fixture_garbage.so:");  // dlerror() names the file too
}

TEST(Registry, EntryReturningNull) {
  ddph::Error e = load_error("entrynull", "fixture_entrynull");
  EXPECT_EQ(e.code(), DDPH_VERSION_MISMATCH);
  EXPECT_HAS(e.what(), "returned NULL");
}

TEST(Registry, AbiMajorMismatch) {
  ddph::Error e = load_error("abi2", "fixture_abi2");
  EXPECT_EQ(e.code(), DDPH_VERSION_MISMATCH);
  const std::string minor = std::to_string(DDPH_ABI_MINOR);  // the fixture keeps the minor
  EXPECT_HAS(e.what(), "built for ABI 2." + minor);
  EXPECT_HAS(e.what(), "implements ABI 1." + minor);
}

TEST(Registry, NewerMinorStillLoads) {
  Registry registry({fixture_dir("minor")});
  const auto& p = registry.load("fixture_minor");
  EXPECT_EQ(p.desc().abi_minor, 99u);
}

TEST(Registry, PluginStructTooSmall) {
  ddph::Error e = load_error("small", "fixture_small");
  EXPECT_EQ(e.code(), DDPH_VERSION_MISMATCH);
  EXPECT_HAS(e.what(), "ddph_plugin_t.struct_size is 24");
}

TEST(Registry, HookStructTooSmall) {
  ddph::Error e = load_error("smallhook", "fixture_smallhook");
  EXPECT_EQ(e.code(), DDPH_VERSION_MISMATCH);
  EXPECT_HAS(e.what(), "ddph_hook_t hooks[0].struct_size is 16");
}

TEST(Registry, FamilyMismatch) {
  ddph::Error e = load_error("mismatch", "fixture_mismatch");
  EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
  EXPECT_HAS(e.what(), "'something_else'");
  EXPECT_HAS(e.what(), "'fixture_mismatch'");
}

TEST(Registry, RejectsPathLikeFamilyNames) {
  ddph::Error e = load_error("good", "../good/fixture_sum");
  EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
  EXPECT_HAS(e.what(), "not a valid name");
}

TEST(Registry, ListsPluginFilesWithShadowing) {
  auto files = ddph::loader::find_plugin_files({fixture_dir("good"), fixture_dir("shadow")});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].family, "comm_fake");
  EXPECT_EQ(files[1].family, "fixture_sum");
  EXPECT_EQ(files[1].path, fixture_dir("good") + "/libddph_fixture_sum.so");
}

namespace {

// A search path with fixture folders standing in for the built-in ones.
ddph::loader::SearchPath fixture_path(std::vector<std::string> given, std::vector<std::string> env,
                                      std::vector<std::string> builtin) {
  ddph::loader::SearchPath path;
  path.given = std::move(given);
  path.env = std::move(env);
  path.builtin = std::move(builtin);
  return path;
}

ddph::loader::PluginPolicy replacing(std::vector<std::string> families) {
  ddph::loader::PluginPolicy policy;
  policy.replace_builtin = std::move(families);
  return policy;
}

}  // namespace

// Issue 21: a job folder's copy of a built-in family used to replace it silently.
TEST(Registry, ABuiltInFamilyIsReplacedOnlyWhenThePolicyNamesIt) {
  const std::string builtin = fixture_dir("good") + "/libddph_fixture_sum.so";
  const std::string other = fixture_dir("shadow") + "/libddph_fixture_sum.so";
  for (bool from_env : {false, true}) {
    auto path = from_env ? fixture_path({}, {fixture_dir("shadow")}, {fixture_dir("good")})
                         : fixture_path({fixture_dir("shadow")}, {}, {fixture_dir("good")});
    Registry refusing(path, replacing({"comm_gloo"}));
    try {
      refusing.load("fixture_sum");
      FAIL() << "used " << other << " without replace_builtin";
    } catch (const ddph::Error& e) {
      EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
      EXPECT_HAS(e.what(), "plugin family 'fixture_sum' is built in (" + builtin + ")");
      EXPECT_HAS(e.what(), other + " (from " + (from_env ? "DDPH_PLUGIN_PATH" : "plugin_path") +
                               ") comes first");
      EXPECT_HAS(e.what(), "add `replace_builtin: [fixture_sum]`");
    }
    Registry allowed(path, replacing({"fixture_sum"}));
    EXPECT_EQ(allowed.choose("fixture_sum").path, other);
    EXPECT_STREQ(allowed.load("fixture_sum").desc().version, "shadow");
  }
  // A family that is not built in comes from plugin_path as before, and a
  // built-in family with no other copy needs no leave.
  Registry registry(fixture_path({fixture_dir("shadow")}, {}, {fixture_dir("v1_0")}),
                    ddph::loader::PluginPolicy{});
  EXPECT_EQ(registry.choose("comm_fake").origin, ddph::loader::PluginOrigin::kBuiltin);
  Registry plain(fixture_path({fixture_dir("shadow")}, {}, {fixture_dir("minor")}),
                 ddph::loader::PluginPolicy{});
  EXPECT_STREQ(plain.load("fixture_sum").desc().version, "shadow");
}

TEST(Registry, AFolderThatIsABuiltInOneHoldsBuiltInFiles) {
  // DDPH_PLUGIN_PATH set to the built-in folder, spelled differently.
  Registry registry(fixture_path({}, {fixture_dir("good") + "/../good/"}, {fixture_dir("good")}),
                    ddph::loader::PluginPolicy{});
  const auto copies = registry.copies("fixture_sum");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].origin, ddph::loader::PluginOrigin::kBuiltin);
  EXPECT_NO_THROW(registry.load("fixture_sum"));
}

TEST(Registry, CopiesListsEveryFolderInSearchOrder) {
  Registry registry(
      fixture_path({fixture_dir("shadow")}, {fixture_dir("v1_0")}, {fixture_dir("good")}),
      replacing({"fixture_sum"}));
  const auto copies = registry.copies("fixture_sum");
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies[0].path, fixture_dir("shadow") + "/libddph_fixture_sum.so");
  EXPECT_EQ(copies[0].origin, ddph::loader::PluginOrigin::kGiven);
  EXPECT_EQ(copies[1].origin, ddph::loader::PluginOrigin::kEnv);
  EXPECT_EQ(copies[2].origin, ddph::loader::PluginOrigin::kBuiltin);
}

TEST(Registry, LoadingAShadowedFamilyLogsAWarning) {
  Registry registry({fixture_dir("good"), fixture_dir("shadow")});
  testing::internal::CaptureStderr();
  registry.load("fixture_sum");
  registry.load("comm_fake");  // one copy: nothing to say
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_HAS(err,
             "ddph warn: plugin family 'fixture_sum' is in 2 folders of the search path: "
             "using " +
                 fixture_dir("good") + "/libddph_fixture_sum.so (plugin_path), not " +
                 fixture_dir("shadow") + "/libddph_fixture_sum.so (plugin_path)");
  EXPECT_EQ(err.find("comm_fake"), std::string::npos) << err;
}

TEST(Registry, ABuiltInFolderOnTheEnvPathStaysBuiltIn) {
  // As the tests set DDPH_PLUGIN_PATH: to the built-in folder itself.
  Registry registry(
      fixture_path({fixture_dir("shadow")}, {fixture_dir("good")}, {fixture_dir("good")}),
      ddph::loader::PluginPolicy{});
  ASSERT_EQ(registry.dirs().size(), 2u);
  EXPECT_EQ(registry.choose("comm_fake").origin, ddph::loader::PluginOrigin::kBuiltin);
  EXPECT_THROW(registry.choose("fixture_sum"), ddph::Error);  // shadow's copy needs leave
}
